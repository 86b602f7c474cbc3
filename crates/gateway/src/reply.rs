//! What a tool call answers: its outcome, the policy's verdict, the tool's result, and where
//! the call sits in the ledger. The HTTP routes and the MCP adapter render the same value.

use forge_policy::Decision;
use forge_types::SessionId;
use serde::{Deserialize, Serialize};

/// How a call ended. Every outcome is recorded in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The tool ran and produced its result (a command that exits non-zero is still `ok`:
    /// its exit code is the result).
    Ok,
    /// The tool ran and could not do its job (a missing file, a non-unique edit).
    Failed,
    /// The arguments did not match the tool's schema, or the tool is unknown; nothing ran.
    Invalid,
    /// The policy denied the call; nothing ran.
    Denied,
    /// The policy wants a person to approve the call first; nothing ran.
    Pending,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Invalid => "invalid",
            Self::Denied => "denied",
            Self::Pending => "pending",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        [
            Self::Ok,
            Self::Failed,
            Self::Invalid,
            Self::Denied,
            Self::Pending,
        ]
        .into_iter()
        .find(|outcome| outcome.as_str() == text)
    }
}

/// Why a call did not produce a result: the field at fault (for invalid arguments) and a
/// sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolError {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}

/// The answer to one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolReply {
    pub session_id: SessionId,
    pub tool: String,
    pub outcome: Outcome,
    /// The policy's decision; absent when the arguments were invalid (nothing was judged).
    pub decision: Option<Decision>,
    /// The rule that decided (`default` when nothing objected).
    pub rule: Option<String>,
    pub reason: Option<String>,
    /// The tool's result (ARF's response fields); `null` unless the outcome is `ok`.
    pub result: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    pub duration_us: u64,
    /// The call's line in the ledger.
    pub ledger_seq: u64,
    /// This reply was recorded earlier under the same idempotency key and is returned again
    /// without running the tool twice.
    #[serde(default)]
    pub replayed: bool,
}

impl ToolReply {
    /// Whether an MCP client should see this reply as a tool error.
    pub fn is_error(&self) -> bool {
        self.outcome != Outcome::Ok
    }

    /// The reply as one text block: the result's JSON, or the error in a sentence (MCP's
    /// text content).
    pub fn text(&self) -> String {
        match self.outcome {
            Outcome::Ok => self.result.to_string(),
            Outcome::Failed | Outcome::Invalid => {
                let error = self.error.as_ref();
                let message = error.map_or("the call failed", |e| e.message.as_str());
                match error.and_then(|e| e.field.as_deref()) {
                    Some(field) => format!("{}: invalid `{field}`: {message}", self.tool),
                    None => format!("{}: {message}", self.tool),
                }
            }
            Outcome::Denied | Outcome::Pending => format!(
                "{}: {} by rule `{}`: {}",
                self.tool,
                if self.outcome == Outcome::Denied {
                    "denied"
                } else {
                    "needs approval"
                },
                self.rule.as_deref().unwrap_or("default"),
                self.reason.as_deref().unwrap_or_default()
            ),
        }
    }
}
