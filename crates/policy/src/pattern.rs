//! Glob patterns for rules, compiled when they are parsed so that a `Policy` value can never
//! hold a pattern that does not compile and evaluating a call never has to fail.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a glob or host pattern was rejected. The text says which pattern and why, because a
/// serde error carries only this message to the field it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("invalid glob {glob:?}: {reason}")]
    Glob { glob: String, reason: String },
    #[error("invalid host pattern {pattern:?}: {reason}")]
    Host {
        pattern: String,
        reason: &'static str,
    },
}

/// A glob over tool names or paths, in globset's syntax (ripgrep's): `*` and `?` stay within
/// one path component, `**` crosses them, `{a,b}` and `[ab]` as usual. So
/// `/workspace/*.py` matches `/workspace/app.py` but not `/workspace/src/app.py`, and
/// `/workspace/**/.git/**` matches every file under any `.git` directory.
///
/// Written and compared as its source text; it compiles once, when created.
#[derive(Clone)]
pub struct Glob {
    source: String,
    matcher: globset::GlobMatcher,
}

impl Glob {
    pub fn new(source: &str) -> Result<Self, PatternError> {
        let glob = globset::GlobBuilder::new(source)
            .literal_separator(true)
            .build()
            .map_err(|err| PatternError::Glob {
                glob: source.to_owned(),
                reason: err.kind().to_string(),
            })?;
        Ok(Self {
            source: source.to_owned(),
            matcher: glob.compile_matcher(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.matcher.is_match(text)
    }
}

impl FromStr for Glob {
    type Err = PatternError;

    fn from_str(source: &str) -> Result<Self, Self::Err> {
        Self::new(source)
    }
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Glob {}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Glob").field(&self.source).finish()
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Serialize for Glob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = String::deserialize(deserializer)?;
        Self::new(&source).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn stars_stay_within_a_component() {
        let glob = Glob::new("/workspace/*.py").unwrap();
        assert!(glob.is_match("/workspace/app.py"));
        assert!(!glob.is_match("/workspace/src/app.py"));

        let git = Glob::new("/workspace/**/.git/**").unwrap();
        assert!(git.is_match("/workspace/.git/config"));
        assert!(git.is_match("/workspace/vendor/lib/.git/HEAD"));
        assert!(!git.is_match("/workspace/.gitignore"));

        let tools = Glob::new("install_*").unwrap();
        assert!(tools.is_match("install_node_deps"));
        assert!(!tools.is_match("read_file"));
    }

    #[test]
    fn bad_globs_are_refused_with_the_pattern() {
        assert_eq!(
            Glob::new("/workspace/[a").unwrap_err(),
            PatternError::Glob {
                glob: "/workspace/[a".to_owned(),
                reason: "unclosed character class; missing ']'".to_owned(),
            }
        );
    }

    #[test]
    fn globs_round_trip_as_their_text() {
        let glob: Glob = serde_json::from_str(r#""src/**/*.rs""#).unwrap();
        assert_eq!(glob, Glob::new("src/**/*.rs").unwrap());
        assert_eq!(serde_json::to_string(&glob).unwrap(), r#""src/**/*.rs""#);
        let err = serde_json::from_str::<Glob>(r#""{a""#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid glob \"{a\": unclosed alternate group; missing '}' \
             (maybe escape '{' with '[{]'?)"
        );
    }
}
