//! The policy's answer: an ordered [`Decision`] and the [`Verdict`] that says which rule
//! decided and why. A denial is a value the gateway records and returns, not an error.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What to do with a call, ordered from most to least permissive so that combining
/// decisions is `max`: the strictest rule wins.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run it.
    #[default]
    Allow,
    /// Pause until a person approves it.
    Ask,
    /// Refuse it.
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of evaluating one call: the decision, the stable id of the rule that decided
/// it (a built-in id such as `paths.writable`, a rule's own id, or `default` when nothing
/// objected), and a sentence for people and the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub decision: Decision,
    pub rule: String,
    pub reason: String,
}

impl Verdict {
    pub(crate) fn deny(rule: &str, reason: String) -> Self {
        Self {
            decision: Decision::Deny,
            rule: rule.to_owned(),
            reason,
        }
    }

    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allow
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn decisions_order_from_allow_to_deny() {
        let mut all = vec![Decision::Deny, Decision::Allow, Decision::Ask];
        all.sort();
        assert_eq!(all, vec![Decision::Allow, Decision::Ask, Decision::Deny]);
        assert_eq!(Decision::Allow.max(Decision::Deny), Decision::Deny);
    }

    #[test]
    fn decisions_are_lower_case_on_the_wire() {
        assert_eq!(
            serde_json::to_string(&[Decision::Allow, Decision::Ask, Decision::Deny]).unwrap(),
            r#"["allow","ask","deny"]"#
        );
        assert_eq!(
            serde_json::from_str::<Decision>(r#""ask""#).unwrap(),
            Decision::Ask
        );
        assert!(serde_json::from_str::<Decision>(r#""Ask""#).is_err());
    }
}
