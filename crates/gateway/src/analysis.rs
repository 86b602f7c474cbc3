//! The gateway's side of code analysis: files are read out of the sandbox through the
//! backend, and their bytes handed to `forge-analysis`, which is pure. Results become the
//! tools' JSON.

use std::path::Path;

use forge_analysis::{Language, SearchQuery, StackInput};
use serde_json::{Value, json};

use crate::reply::ToolError;
use crate::tools::{failed, invalid};

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

pub(crate) fn language(path: &str) -> Result<Language, ToolError> {
    Language::from_path(Path::new(path)).map_err(|error| invalid("path", error.to_string()))
}

/// A compiled `search_in_files` query and its results so far.
pub(crate) struct Matcher {
    search: forge_analysis::Search,
    results: forge_analysis::SearchResults,
}

impl Matcher {
    pub(crate) fn new(pattern: &str, max_matches: usize) -> Result<Self, String> {
        let search = SearchQuery {
            max_matches,
            ..SearchQuery::regex(pattern)
        }
        .compile()
        .map_err(|error| error.to_string())?;
        let results = search.results();
        Ok(Self { search, results })
    }

    /// Searches one more file; `false` once the caps are reached.
    pub(crate) fn add(&mut self, path: &str, bytes: &[u8]) -> bool {
        self.search.add_file(&mut self.results, path, bytes)
    }

    /// The hits in ARF's shape (`file`, `line`, `content`) plus the column.
    pub(crate) fn finish(self) -> (Vec<Value>, usize, bool) {
        let hits = self
            .results
            .matches
            .iter()
            .map(|m| json!({"file": m.path, "line": m.line, "column": m.column, "content": m.text}))
            .collect();
        (hits, self.results.files_searched, self.results.truncated)
    }
}

/// Whether a directory name is one searches and exports skip.
pub(crate) fn is_ignored_dir(name: &str) -> bool {
    forge_analysis::IGNORED_DIRS.contains(&name)
}

/// Brackets of a file, with its language's grammar when the extension names one.
pub(crate) fn brackets(path: &str, bytes: &[u8]) -> Result<Value, ToolError> {
    let source = String::from_utf8_lossy(bytes);
    let language = Language::from_path(Path::new(path)).ok();
    forge_analysis::brackets(&source, language)
        .map(|report| to_json(&report))
        .map_err(|error| failed(error.to_string()))
}

/// Functions a file defines.
pub(crate) fn functions(path: &str, bytes: &[u8]) -> Result<Value, ToolError> {
    let language = language(path)?;
    let source = String::from_utf8_lossy(bytes);
    let symbols =
        forge_analysis::functions(language, &source).map_err(|error| failed(error.to_string()))?;
    Ok(json!({
        "language": language.as_str(),
        "count": symbols.len(),
        "functions": to_json(&symbols),
    }))
}

/// Syntax errors and rule findings of a file.
pub(crate) fn validate(path: &str, bytes: &[u8]) -> Result<Value, ToolError> {
    let language = language(path)?;
    let source = String::from_utf8_lossy(bytes);
    forge_analysis::validate(language, &source)
        .map(|report| to_json(&report))
        .map_err(|error| failed(error.to_string()))
}

/// Whether `detect_stack` wants a file's contents, not just its name.
pub(crate) fn wants_contents(path: &str) -> bool {
    forge_analysis::wants_contents(path)
}

/// Most manifest bytes `detect_stack` hands over per file.
pub(crate) const MAX_MANIFEST_BYTES: u64 = forge_analysis::MAX_MANIFEST_BYTES as u64;

/// A project's stack from its files (paths relative to the project) and the contents of
/// its manifests.
pub(crate) fn detect_stack(files: &[(String, Option<String>)]) -> Value {
    let inputs: Vec<StackInput<'_>> = files
        .iter()
        .map(|(path, contents)| match contents {
            Some(text) => StackInput::with_contents(path, text),
            None => StackInput::path(path),
        })
        .collect();
    to_json(&forge_analysis::detect_stack(&inputs))
}
