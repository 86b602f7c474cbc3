//! Operator and user rules: extra conditions on top of a policy's built-in checks, each with a
//! decision, a reason and examples that are checked when the policy loads.
//!
//! Rules can only tighten. The strictest decision wins, so an `allow` rule could never
//! change an outcome; loosening is done through the policy's fields (`tools`, `commands`,
//! `writable_paths`, `network`), which the operator's ceilings bound.

use serde::{Deserialize, Serialize};

use crate::call::{Access, ToolCall};
use crate::decision::{Decision, Verdict};
use crate::host::{Host, HostPattern};
use crate::path::normalize;
use crate::pattern::Glob;

/// One rule. It matches a call when every condition it sets holds; a condition the rule does
/// not set matches anything, and a condition about something the call lacks (a host, when
/// the call connects nowhere) does not match. A rule with no conditions matches every call.
///
/// ```toml
/// [[rules]]
/// id = "no-git-internals"
/// decision = "deny"
/// path = "/workspace/**/.git/**"
/// access = "write"
/// reason = "history is the person's to rewrite, not the agent's"
///
/// [[rules.examples.matches]]
/// tool = "write_file"
/// paths = [{ path = "/workspace/.git/config", access = "write" }]
///
/// [[rules.examples.not_matches]]
/// tool = "read_file"
/// paths = [{ path = "/workspace/.git/config", access = "read" }]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Stable id, recorded in verdicts and the ledger: ASCII letters, digits, `.`, `_`, `-`.
    pub id: String,
    pub decision: Decision,
    /// The tool name matches this glob (`install_*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<Glob>,
    /// Some path of the call, normalized, matches this glob (`/workspace/**/*.lock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Glob>,
    /// Some path of the call is used this way; with `path`, the same path must match both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// The call's argv starts with these arguments, compared exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_prefix: Option<Vec<String>>,
    /// The call's destination matches this host pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostPattern>,
    /// Why, for the agent that is refused and the person reading the ledger.
    pub reason: String,
    #[serde(default, skip_serializing_if = "Examples::is_empty")]
    pub examples: Examples,
}

/// Calls a rule must match and calls it must not, checked by [`crate::Policy::validate`] so
/// that a rule which does not do what its author meant fails at load, not in production.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Examples {
    pub matches: Vec<ToolCall>,
    pub not_matches: Vec<ToolCall>,
}

impl Examples {
    pub fn is_empty(&self) -> bool {
        self.matches.is_empty() && self.not_matches.is_empty()
    }
}

impl Rule {
    /// A rule with no conditions yet, so it matches every call; add them with the builders.
    pub fn new(id: impl Into<String>, decision: Decision, reason: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            decision,
            tool: None,
            path: None,
            access: None,
            command_prefix: None,
            host: None,
            reason: reason.into(),
            examples: Examples::default(),
        }
    }

    #[must_use]
    pub fn tool(mut self, glob: Glob) -> Self {
        self.tool = Some(glob);
        self
    }

    #[must_use]
    pub fn path(mut self, glob: Glob) -> Self {
        self.path = Some(glob);
        self
    }

    #[must_use]
    pub fn access(mut self, access: Access) -> Self {
        self.access = Some(access);
        self
    }

    #[must_use]
    pub fn command_prefix<S: Into<String>>(mut self, prefix: impl IntoIterator<Item = S>) -> Self {
        self.command_prefix = Some(prefix.into_iter().map(Into::into).collect());
        self
    }

    #[must_use]
    pub fn host(mut self, pattern: HostPattern) -> Self {
        self.host = Some(pattern);
        self
    }

    #[must_use]
    pub fn examples(mut self, examples: Examples) -> Self {
        self.examples = examples;
        self
    }

    /// Whether every condition of this rule holds for `call`.
    pub fn matches(&self, call: &ToolCall) -> bool {
        let tool = self
            .tool
            .as_ref()
            .is_none_or(|glob| glob.is_match(&call.tool));
        let path = (self.path.is_none() && self.access.is_none())
            || call.paths.iter().any(|used| {
                self.access.is_none_or(|access| access == used.access)
                    && self.path.as_ref().is_none_or(|glob| {
                        normalize(&used.path).map_or_else(
                            || glob.is_match(&used.path),
                            |normal| glob.is_match(&normal),
                        )
                    })
            });
        let command = self.command_prefix.as_ref().is_none_or(|prefix| {
            call.command
                .as_ref()
                .is_some_and(|argv| argv.starts_with(prefix))
        });
        let host = self.host.as_ref().is_none_or(|pattern| {
            call.destination.as_ref().is_some_and(|destination| {
                Host::parse(&destination.host)
                    .is_ok_and(|host| pattern.matches(&host, destination.port))
            })
        });
        tool && path && command && host
    }

    /// This rule's verdict on `call`, if it matches.
    pub(crate) fn judge(&self, call: &ToolCall) -> Option<Verdict> {
        self.matches(call).then(|| Verdict {
            decision: self.decision,
            rule: self.id.clone(),
            reason: self.reason.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn glob(text: &str) -> Glob {
        Glob::new(text).unwrap()
    }

    #[test]
    fn a_rule_needs_every_condition() {
        let rule = Rule::new(
            "ask-installs",
            Decision::Ask,
            "installs run package scripts",
        )
        .tool(glob("install_*"))
        .path(glob("/workspace/**"))
        .access(Access::Write);
        let cases = [
            (
                ToolCall::new("install_node_deps").write("/workspace/app"),
                true,
            ),
            (
                ToolCall::new("install_node_deps").write("/workspace/../etc"),
                false,
            ),
            (
                ToolCall::new("install_node_deps").read("/workspace/app"),
                false,
            ),
            (ToolCall::new("install_node_deps"), false),
            (ToolCall::new("write_file").write("/workspace/app"), false),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(call, _)| (call.clone(), rule.matches(call)))
            .collect();
        assert_eq!(got, cases.to_vec());
    }

    #[test]
    fn commands_and_hosts_must_be_present_to_match() {
        let by_command = Rule::new("no-force-push", Decision::Deny, "never force-push")
            .command_prefix(["git", "push", "--force"]);
        assert!(
            by_command.matches(
                &ToolCall::new("run_command").command(["git", "push", "--force", "origin"])
            )
        );
        assert!(!by_command.matches(&ToolCall::new("run_command").command(["git", "push"])));
        assert!(!by_command.matches(&ToolCall::new("run_command")));

        let by_host = Rule::new("ask-github", Decision::Ask, "check with a person")
            .host(HostPattern::new("*.github.com").unwrap());
        assert!(by_host.matches(&ToolCall::new("clone_repo").destination("API.GitHub.com", None)));
        assert!(!by_host.matches(&ToolCall::new("clone_repo").destination("github.com", None)));
        assert!(!by_host.matches(&ToolCall::new("clone_repo")));
    }

    #[test]
    fn a_matching_rule_gives_its_own_verdict() {
        let rule = Rule::new(
            "ask-everything",
            Decision::Ask,
            "a person approves each call",
        );
        assert_eq!(
            rule.judge(&ToolCall::new("read_file")),
            Some(Verdict {
                decision: Decision::Ask,
                rule: "ask-everything".to_owned(),
                reason: "a person approves each call".to_owned(),
            })
        );
    }
}
