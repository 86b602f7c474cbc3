//! The tool gateway's shared vocabulary: a session id and what a tool looks like to a client
//! (its name, a sentence and the JSON Schema of its arguments). The gateway, its HTTP routes
//! and the MCP adapter all describe tools with [`ToolSpec`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// A gateway session id: `ses-` and twelve lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// Builds an id from six random bytes.
    pub fn from_random(bytes: [u8; 6]) -> Self {
        let mut wide = [0; 8];
        wide[2..].copy_from_slice(&bytes);
        Self(format!("ses-{:012x}", u64::from_be_bytes(wide)))
    }

    /// Accepts an id a client sent, refusing anything that could not have come from
    /// [`SessionId::from_random`] (so an id can be used as a path component safely).
    pub fn parse(text: &str) -> Option<Self> {
        crate::sandbox::is_hex_id(text, "ses-", 12).then(|| Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tool as clients see it: MCP's `tools/list` entry and `GET /api/v1/tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema (draft 2020-12) of the call's arguments object.
    pub input_schema: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn session_ids_round_trip_and_refuse_paths() {
        let id = SessionId::from_random([0, 1, 2, 0xab, 0xcd, 0xef]);
        assert_eq!(id.as_str(), "ses-000102abcdef");
        assert_eq!(SessionId::parse(id.as_str()), Some(id));
        for bad in [
            "ses-../../etc",
            "ses-000102ABCDEF",
            "sb-00010203",
            "ses-0001",
        ] {
            assert_eq!(SessionId::parse(bad), None, "{bad}");
        }
    }
}
