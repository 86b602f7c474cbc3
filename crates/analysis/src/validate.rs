//! `validate_code`: syntax errors and rule findings for one source text.

use serde::Serialize;

use crate::language::Language;
use crate::parse::{AnalysisError, parse};
use crate::rules::{Finding, findings};
use crate::syntax::{SyntaxError, syntax_errors};

/// What [`validate`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Validation {
    pub language: Language,
    /// No syntax errors (findings do not make source invalid).
    pub valid: bool,
    pub syntax_errors: Vec<SyntaxError>,
    pub findings: Vec<Finding>,
    /// Some syntax errors or findings were left out: more than the caps
    /// ([`crate::MAX_SYNTAX_ERRORS`], [`crate::MAX_FINDINGS`]), or the rules ran out of time.
    pub truncated: bool,
}

/// Parses `source` as `language` and reports its syntax errors and rule findings (see
/// [`crate::rules()`]). Source over [`crate::MAX_SOURCE_BYTES`] or a parse over
/// [`crate::PARSE_TIME_LIMIT`] is an error, not a result.
pub fn validate(language: Language, source: &str) -> Result<Validation, AnalysisError> {
    let tree = parse(language, source)?;
    let (syntax_errors, errors_truncated) = syntax_errors(&tree, source);
    let (findings, findings_truncated) = findings(language, &tree, source);
    Ok(Validation {
        language,
        valid: syntax_errors.is_empty(),
        syntax_errors,
        findings,
        truncated: errors_truncated || findings_truncated,
    })
}
