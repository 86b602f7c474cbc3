//! The languages with a grammar: how a tool argument or a file name names one, and the
//! tree-sitter grammar behind each.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A language this crate parses. Serialized in lower case (`"python"`, `"tsx"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Python,
    JavaScript,
    TypeScript,
    /// TypeScript with JSX (`.tsx`), a grammar of its own.
    Tsx,
    Rust,
    Go,
    /// POSIX shell and Bash, parsed with the Bash grammar.
    Shell,
}

/// A language name or file that no grammar here covers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LanguageError {
    #[error("unknown language {name:?}; supported: {}", Language::SUPPORTED_NAMES.join(", "))]
    UnknownName { name: String },
    #[error(
        "no language for {path:?} (by its extension); supported extensions: {}",
        Language::EXTENSIONS.iter().map(|(ext, _)| *ext).collect::<Vec<_>>().join(", ")
    )]
    UnknownPath { path: String },
}

impl Language {
    /// Every language, in declaration order.
    pub const ALL: [Self; 7] = [
        Self::Python,
        Self::JavaScript,
        Self::TypeScript,
        Self::Tsx,
        Self::Rust,
        Self::Go,
        Self::Shell,
    ];

    /// The names [`Language::from_name`] accepts (compared case-insensitively).
    pub const SUPPORTED_NAMES: &[&str] = &[
        "python",
        "py",
        "python3",
        "javascript",
        "js",
        "node",
        "nodejs",
        "jsx",
        "mjs",
        "cjs",
        "typescript",
        "ts",
        "tsx",
        "rust",
        "rs",
        "go",
        "golang",
        "shell",
        "sh",
        "bash",
        "zsh",
    ];

    /// File extensions (without the dot) and their language.
    pub const EXTENSIONS: &[(&str, Self)] = &[
        ("py", Self::Python),
        ("pyi", Self::Python),
        ("pyw", Self::Python),
        ("js", Self::JavaScript),
        ("mjs", Self::JavaScript),
        ("cjs", Self::JavaScript),
        ("jsx", Self::JavaScript),
        ("ts", Self::TypeScript),
        ("mts", Self::TypeScript),
        ("cts", Self::TypeScript),
        ("tsx", Self::Tsx),
        ("rs", Self::Rust),
        ("go", Self::Go),
        ("sh", Self::Shell),
        ("bash", Self::Shell),
        ("zsh", Self::Shell),
    ];

    /// The language a tool argument names: `"python"`, `"py"`, `"js"`, `"node"`, `"ts"`,
    /// `"rust"`, `"go"`, `"bash"`, `"sh"`, … (see [`Language::SUPPORTED_NAMES`]), in any case.
    pub fn from_name(name: &str) -> Result<Self, LanguageError> {
        let lower = name.trim().to_ascii_lowercase();
        let language = match lower.as_str() {
            "python" | "py" | "python3" => Self::Python,
            "javascript" | "js" | "node" | "nodejs" | "jsx" | "mjs" | "cjs" => Self::JavaScript,
            "typescript" | "ts" => Self::TypeScript,
            "tsx" => Self::Tsx,
            "rust" | "rs" => Self::Rust,
            "go" | "golang" => Self::Go,
            "shell" | "sh" | "bash" | "zsh" => Self::Shell,
            _ => {
                return Err(LanguageError::UnknownName {
                    name: name.to_owned(),
                });
            }
        };
        Ok(language)
    }

    /// The language of a file, by its extension alone (the file is not read, so a shebang
    /// does not count). Extensions compare case-insensitively.
    pub fn from_path(path: &Path) -> Result<Self, LanguageError> {
        path.extension()
            .and_then(|ext| ext.to_str())
            .and_then(|ext| {
                let ext = ext.to_ascii_lowercase();
                Self::EXTENSIONS
                    .iter()
                    .find(|(known, _)| *known == ext)
                    .map(|(_, language)| *language)
            })
            .ok_or_else(|| LanguageError::UnknownPath {
                path: path.display().to_string(),
            })
    }

    /// The canonical name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::JavaScript => "javascript",
            Self::TypeScript => "typescript",
            Self::Tsx => "tsx",
            Self::Rust => "rust",
            Self::Go => "go",
            Self::Shell => "shell",
        }
    }

    /// The tree-sitter grammar.
    pub(crate) fn grammar(self) -> tree_sitter::Language {
        match self {
            Self::Python => tree_sitter_python::LANGUAGE.into(),
            Self::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Self::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Self::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Self::Rust => tree_sitter_rust::LANGUAGE.into(),
            Self::Go => tree_sitter_go::LANGUAGE.into(),
            Self::Shell => tree_sitter_bash::LANGUAGE.into(),
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Language {
    type Err = LanguageError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s)
    }
}
