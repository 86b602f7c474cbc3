//! What a tool call would touch, as the gateway describes it to the policy before running it.
//!
//! The gateway builds a [`ToolCall`] from arguments it has already validated: paths are
//! absolute and lexically normalized, hosts come from parsed URLs. The policy still re-checks
//! what matters for safety (it folds `..` again, refuses odd host spellings), so a gateway bug
//! can make a call fail closed but not slip through.

use serde::{Deserialize, Serialize};

/// How a call uses a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Its contents (or, for a directory, its entries) reach the caller.
    Read,
    /// It is created, changed, moved or deleted.
    Write,
}

/// One path a call touches. A call that both reads and changes a path (`edit_file`, the
/// source of `move_path`) lists it twice, once per access, so the secrets rule sees the read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathUse {
    pub path: String,
    pub access: Access,
}

/// Where a call connects: the host as the caller spelled it (a name, IPv4, or IPv6 with or
/// without brackets; never with the port attached) and the port when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Destination {
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// A tool call as the policy sees it: the tool and everything it would touch.
///
/// Policy files use the same shape for rule examples, so it is plain data with builders for
/// code:
///
/// ```
/// use forge_policy::ToolCall;
///
/// let call = ToolCall::new("move_path")
///     .read("/workspace/a.txt")
///     .write("/workspace/a.txt")
///     .write("/workspace/b.txt");
/// assert_eq!(call.paths.len(), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathUse>,
    /// The argv a command tool would run (`run_command`, `start_process`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Where a network tool would connect (`http_health_check`, `check_port`, `clone_repo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<Destination>,
    /// The language `run_code` would run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

impl ToolCall {
    /// A call that touches nothing yet.
    pub fn new(tool: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            paths: Vec::new(),
            command: None,
            destination: None,
            language: None,
        }
    }

    /// Adds a path whose contents reach the caller.
    #[must_use]
    pub fn read(mut self, path: impl Into<String>) -> Self {
        self.paths.push(PathUse {
            path: path.into(),
            access: Access::Read,
        });
        self
    }

    /// Adds a path the call would create, change or remove.
    #[must_use]
    pub fn write(mut self, path: impl Into<String>) -> Self {
        self.paths.push(PathUse {
            path: path.into(),
            access: Access::Write,
        });
        self
    }

    /// Sets the argv the call would run.
    #[must_use]
    pub fn command<S: Into<String>>(mut self, argv: impl IntoIterator<Item = S>) -> Self {
        self.command = Some(argv.into_iter().map(Into::into).collect());
        self
    }

    /// Sets where the call would connect.
    #[must_use]
    pub fn destination(mut self, host: impl Into<String>, port: Option<u16>) -> Self {
        self.destination = Some(Destination {
            host: host.into(),
            port,
        });
        self
    }

    /// Sets the language `run_code` would run.
    #[must_use]
    pub fn language(mut self, language: impl Into<String>) -> Self {
        self.language = Some(language.into());
        self
    }
}

/// What the session has used so far, kept by the gateway.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionUsage {
    /// Tool calls already made in this session, not counting the one being judged. The
    /// gateway should count denied calls too, so an agent stuck in a loop of refused calls
    /// still runs out.
    pub calls: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn builders_fill_the_fields() {
        let call = ToolCall::new("http_health_check")
            .destination("example.org", Some(443))
            .read("/workspace/a")
            .command(["npm", "test"])
            .language("node");
        assert_eq!(
            call,
            ToolCall {
                tool: "http_health_check".to_owned(),
                paths: vec![PathUse {
                    path: "/workspace/a".to_owned(),
                    access: Access::Read,
                }],
                command: Some(vec!["npm".to_owned(), "test".to_owned()]),
                destination: Some(Destination {
                    host: "example.org".to_owned(),
                    port: Some(443),
                }),
                language: Some("node".to_owned()),
            }
        );
    }

    #[test]
    fn calls_serialize_without_empty_fields() {
        let call = ToolCall::new("write_file").write("/workspace/a");
        assert_eq!(
            serde_json::to_value(&call).unwrap(),
            serde_json::json!({
                "tool": "write_file",
                "paths": [{"path": "/workspace/a", "access": "write"}],
            })
        );
    }
}
