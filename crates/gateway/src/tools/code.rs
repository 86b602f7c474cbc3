//! Code tools: running snippets and commands in the sandbox under the session's limits, and
//! reading code (brackets, functions, checks) from files read through the sandbox.

use forge_policy::ToolCall;
use forge_types::ExecRequest;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::files::read_capped;
use super::{Cx, Tool, WORKSPACE, exec, exec_value, resolve};
use crate::reply::ToolError;

/// A language `run_code` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Language {
    Python,
    Node,
    /// Only when the session's policy allows a shell.
    Shell,
}

impl Language {
    fn as_str(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Node => "node",
            Self::Shell => "shell",
        }
    }

    /// The interpreter, reading the program from stdin (so its size has no argv limit).
    fn argv(self) -> [&'static str; 2] {
        match self {
            Self::Python => ["python3", "-"],
            Self::Node => ["node", "-"],
            Self::Shell => ["sh", "-s"],
        }
    }
}

/// Run a snippet of code.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunCode {
    language: Language,
    /// The program.
    code: String,
    /// Wall-clock limit; never above the session's max_execution_seconds (0 or absent: that
    /// maximum).
    timeout_seconds: Option<u64>,
}

impl Tool for RunCode {
    const NAME: &'static str = "run_code";
    const DESCRIPTION: &'static str = "Run a Python, Node or (when the policy allows a shell) shell snippet in the sandbox, in /workspace, under the session's time and output limits.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).language(self.language.as_str()))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let request = ExecRequest::argv(self.language.argv())
            .with_stdin(self.code.into_bytes())
            .with_cwd(WORKSPACE);
        let result = exec(cx, request, self.timeout_seconds).await?;
        let mut value = exec_value(cx, &result);
        value["language"] = json!(self.language.as_str());
        Ok(value)
    }
}

/// Run one command, as an argument vector (no shell).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunCommand {
    /// Program and arguments, e.g. ["python", "-m", "pytest"]; must match the session's
    /// command allowlist.
    #[schemars(length(min = 1))]
    command: Vec<String>,
    /// Working directory; relative paths are under /workspace.
    cwd: Option<String>,
    /// Wall-clock limit; never above the session's max_execution_seconds.
    timeout_seconds: Option<u64>,
}

impl Tool for RunCommand {
    const NAME: &'static str = "run_command";
    const DESCRIPTION: &'static str = "Run a command given as an argument vector (no shell) in the sandbox, if the session's command allowlist has it (e.g. python -m pytest, npm test, cargo test, ruff check .).";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        if let Some(cwd) = &self.cwd {
            resolve("cwd", cwd)?;
        }
        Ok(ToolCall::new(Self::NAME).command(self.command.iter().cloned()))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let cwd = match &self.cwd {
            Some(cwd) => resolve("cwd", cwd)?,
            None => WORKSPACE.to_owned(),
        };
        let request = ExecRequest::argv(self.command).with_cwd(cwd);
        let result = exec(cx, request, self.timeout_seconds).await?;
        Ok(exec_value(cx, &result))
    }
}

/// Run a shell command line.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Shell {
    /// The command line, run by /bin/sh -c.
    command: String,
    /// Working directory; relative paths are under /workspace.
    cwd: Option<String>,
    timeout_seconds: Option<u64>,
}

impl Tool for Shell {
    const NAME: &'static str = "shell";
    const DESCRIPTION: &'static str = "Run a shell command line in the sandbox. Exists only in sessions whose policy allows a shell.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let cwd = match &self.cwd {
            Some(cwd) => resolve("cwd", cwd)?,
            None => WORKSPACE.to_owned(),
        };
        let request = ExecRequest::shell(self.command).with_cwd(cwd);
        let result = exec(cx, request, self.timeout_seconds).await?;
        Ok(exec_value(cx, &result))
    }
}

/// Check that a file's brackets balance.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BracketTracker {
    /// File to check; relative paths are under /workspace.
    path: String,
}

impl Tool for BracketTracker {
    const NAME: &'static str = "bracket_tracker";
    const DESCRIPTION: &'static str = "Check that (), [] and {} balance in a file, ignoring strings and comments; reports the first mismatch or what is left open, with line and column.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).read(resolve("path", &self.path)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        analyse_file(cx, &self.path, crate::analysis::brackets).await
    }
}

/// List the functions a source file defines.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FunctionsMapping {
    /// Source file; relative paths are under /workspace. The language comes from its
    /// extension (Python, JavaScript, TypeScript, Rust, Go, shell).
    path: String,
}

impl Tool for FunctionsMapping {
    const NAME: &'static str = "functions_mapping";
    const DESCRIPTION: &'static str = "List the functions and methods a source file defines (name, line, parameters), parsed with tree-sitter.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        let path = resolve("path", &self.path)?;
        crate::analysis::language(&path)?;
        Ok(ToolCall::new(Self::NAME).read(path))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        analyse_file(cx, &self.path, crate::analysis::functions).await
    }
}

/// Check a source file for syntax errors and risky constructs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ValidateCode {
    /// Source file; relative paths are under /workspace. The language comes from its
    /// extension.
    path: String,
}

impl Tool for ValidateCode {
    const NAME: &'static str = "validate_code";
    const DESCRIPTION: &'static str = "Parse a source file with tree-sitter and report syntax errors with positions and rule-based findings (eval, exec, subprocess with shell=True, ...).";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        let path = resolve("path", &self.path)?;
        crate::analysis::language(&path)?;
        Ok(ToolCall::new(Self::NAME).read(path))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        analyse_file(cx, &self.path, crate::analysis::validate).await
    }
}

/// Reads a source file out of the sandbox and analyses it on a blocking thread: parsing
/// hostile input may take seconds (bounded by forge-analysis's limits) and must not stall
/// the async runtime that serves every other session. The result names the path.
async fn analyse_file(
    cx: &Cx<'_>,
    path: &str,
    analyse: fn(&str, &[u8]) -> Result<Value, ToolError>,
) -> Result<Value, ToolError> {
    let path = resolve("path", path)?;
    let bytes = read_capped(cx, &path).await?;
    let (path, result) = tokio::task::spawn_blocking(move || {
        let result = analyse(&path, &bytes);
        (path, result)
    })
    .await
    .map_err(|err| ToolError {
        field: None,
        message: format!("the analysis stopped: {err}"),
    })?;
    let mut value = result?;
    value["path"] = json!(path);
    Ok(value)
}
