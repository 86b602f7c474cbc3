//! The tools: one typed argument struct per tool (its JSON Schema is generated from it), what
//! the call touches as the policy sees it ([`Tool::plan`]), and how it runs in the sandbox
//! ([`Tool::run`]).
//!
//! Tool names, request fields and response fields follow ARF's where ARF has the tool, so
//! ARF clients keep working; Forge's additions (`edit_file`, `delete_path`, `move_path`,
//! `run_command`, `validate_code`, `shell`) follow the same style.

mod artifacts;
#[expect(
    clippy::doc_markdown,
    clippy::doc_link_with_quotes,
    reason = "field doc comments are the JSON Schema descriptions clients read, written as prose"
)]
mod code;
#[expect(
    clippy::doc_markdown,
    reason = "field doc comments are the JSON Schema descriptions clients read, written as prose"
)]
mod files;
#[expect(
    clippy::doc_markdown,
    clippy::doc_link_with_quotes,
    reason = "field doc comments are the JSON Schema descriptions clients read, written as prose"
)]
mod process;
#[expect(
    clippy::doc_markdown,
    reason = "field doc comments are the JSON Schema descriptions clients read, written as prose"
)]
mod project;

use std::future::Future;
use std::path::Path;

use forge_policy::{Policy, ToolCall};
use forge_sandbox::{Backend, SandboxError};
use forge_types::{ExecRequest, ExecResult, SandboxId, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::reply::ToolError;
use crate::schema::Checker;
use crate::session::Live;

/// Where a path that is not absolute is taken to be.
pub(crate) const WORKSPACE: &str = "/workspace";

/// Everything a running tool may use: the session's sandbox through the backend, its policy,
/// and its artifacts directory on the host.
pub(crate) struct Cx<'a> {
    pub(crate) backend: &'a dyn Backend,
    pub(crate) sandbox: &'a SandboxId,
    pub(crate) policy: &'a Policy,
    pub(crate) session: &'a Live,
    pub(crate) artifacts: &'a Path,
}

/// A typed tool.
pub(crate) trait Tool: DeserializeOwned + JsonSchema + Send + Sync + 'static {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// Argument fields whose values are secrets, replaced in the ledger.
    const SECRET_FIELDS: &'static [&'static str] = &[];

    /// What the call would touch, for the policy. An argument the schema cannot express
    /// (a path with a NUL, an option-like ref) is refused here, before the policy.
    fn plan(&self) -> Result<ToolCall, ToolError>;

    /// Runs the call in the sandbox.
    fn run(self, cx: &Cx<'_>) -> impl Future<Output = Result<Value, ToolError>> + Send;
}

/// A tool's listing and its schema checker.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) spec: ToolSpec,
    pub(crate) checker: Checker,
    pub(crate) secret_fields: &'static [&'static str],
}

fn entry<T: Tool>() -> Entry {
    let checker = Checker::new::<T>();
    Entry {
        spec: ToolSpec {
            name: T::NAME.to_owned(),
            description: T::DESCRIPTION.to_owned(),
            input_schema: checker.schema.clone(),
        },
        checker,
        secret_fields: T::SECRET_FIELDS,
    }
}

/// What the typed part of a call produced.
pub(crate) enum Typed {
    /// The arguments could not be used (after the schema accepted them).
    Invalid(ToolError),
    /// The policy did not allow the call; it did not run.
    Stopped(forge_policy::Verdict),
    /// The call ran.
    Ran(forge_policy::Verdict, Result<Value, ToolError>),
}

async fn typed<T: Tool>(
    arguments: Value,
    judge: &mut (dyn FnMut(&ToolCall) -> forge_policy::Verdict + Send),
    cx: &Cx<'_>,
) -> Typed {
    let args: T = match serde_json::from_value(arguments) {
        Ok(args) => args,
        Err(error) => {
            return Typed::Invalid(ToolError {
                field: None,
                message: error.to_string(),
            });
        }
    };
    let call = match args.plan() {
        Ok(call) => call,
        Err(error) => return Typed::Invalid(error),
    };
    let verdict = judge(&call);
    if !verdict.is_allowed() {
        return Typed::Stopped(verdict);
    }
    let result = args.run(cx).await;
    Typed::Ran(verdict, result)
}

macro_rules! registry {
    ($($tool:ty),* $(,)?) => {
        /// Every tool, in catalogue order.
        pub(crate) fn entries() -> Vec<Entry> {
            vec![$(entry::<$tool>()),*]
        }

        /// Runs the typed part of a call to the tool `name` (which must be one of ours).
        pub(crate) async fn dispatch(
            name: &str,
            arguments: Value,
            judge: &mut (dyn FnMut(&ToolCall) -> forge_policy::Verdict + Send),
            cx: &Cx<'_>,
        ) -> Typed {
            match name {
                $(<$tool as Tool>::NAME => typed::<$tool>(arguments, judge, cx).await,)*
                _ => Typed::Invalid(ToolError {
                    field: Some("tool".to_owned()),
                    message: format!("no tool is named {name:?}"),
                }),
            }
        }
    };
}

registry!(
    project::CloneRepo,
    project::CheckoutRef,
    project::DetectStack,
    project::InstallNodeDeps,
    project::InstallPythonDeps,
    project::WriteEnvFile,
    process::StartProcess,
    process::StopProcess,
    process::CheckPort,
    process::HttpHealthCheck,
    process::StreamLogs,
    process::CapturePreviewMetadata,
    artifacts::ExportArtifacts,
    code::RunCode,
    project::InstallPackage,
    files::ReadFile,
    files::WriteFile,
    files::ListDirectory,
    files::SearchInFiles,
    code::FunctionsMapping,
    code::BracketTracker,
    artifacts::ExportArtifact,
    artifacts::SessionReset,
    files::EditFile,
    files::DeletePath,
    files::MovePath,
    code::RunCommand,
    code::ValidateCode,
    code::Shell,
);

// Helpers shared by the tools.

/// A failure with no particular field.
pub(crate) fn failed(message: impl Into<String>) -> ToolError {
    ToolError {
        field: None,
        message: message.into(),
    }
}

/// An argument the tool cannot use.
pub(crate) fn invalid(field: &str, message: impl Into<String>) -> ToolError {
    ToolError {
        field: Some(field.to_owned()),
        message: message.into(),
    }
}

/// A sandbox error as the caller should read it: the sandbox's own message for refused
/// operations (a missing file), a generic sentence otherwise (host details stay out).
pub(crate) fn sandbox_failed(error: &SandboxError) -> ToolError {
    match error {
        SandboxError::Operation { source, .. } => failed(source.message.clone()),
        SandboxError::NotFound { .. } | SandboxError::Gone { .. } => {
            failed("the session's sandbox is gone; close the session and open a new one")
        }
        other => {
            tracing::warn!(error = %other, "a tool's sandbox operation failed");
            failed("the sandbox could not complete the operation")
        }
    }
}

/// A path argument made absolute (relative paths are under `/workspace`) and lexically
/// normalized, as the policy will judge it.
pub(crate) fn resolve(field: &str, path: &str) -> Result<String, ToolError> {
    if path.contains('\0') {
        return Err(invalid(field, "a path cannot contain a NUL byte"));
    }
    if path.is_empty() {
        return Err(invalid(field, "a path cannot be empty"));
    }
    let absolute = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{WORKSPACE}/{path}")
    };
    forge_policy::path::normalize(&absolute).ok_or_else(|| invalid(field, "not a path"))
}

/// `path` joined under `dir` (both already resolved), normalized.
pub(crate) fn join(dir: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{dir}/{path}")
    };
    forge_policy::path::normalize(&joined).unwrap_or(joined)
}

/// The effective timeout of a command: the request's, never above the policy's.
pub(crate) fn timeout_ms(policy: &Policy, requested: Option<u64>) -> u64 {
    let max = policy.max_execution_seconds;
    requested
        .filter(|seconds| *seconds > 0)
        .map_or(max, |seconds| seconds.min(max))
        .saturating_mul(1000)
}

/// Output limit for one stream of a command.
pub(crate) fn output_limit(policy: &Policy) -> usize {
    usize::try_from(policy.max_output_bytes).unwrap_or(usize::MAX)
}

/// Runs a command in the sandbox under the policy's limits.
pub(crate) async fn exec(
    cx: &Cx<'_>,
    mut request: ExecRequest,
    timeout: Option<u64>,
) -> Result<ExecResult, ToolError> {
    request.timeout_ms = Some(timeout_ms(cx.policy, timeout));
    request.output_limit = Some(cx.policy.max_output_bytes);
    cx.backend
        .exec(cx.sandbox, request)
        .await
        .map_err(|error| sandbox_failed(&error))
}

/// A command's result as tools report it (ARF's `exit_code`, `stdout`, `stderr`, plus how
/// it ended and whether output was cut).
pub(crate) fn exec_value(cx: &Cx<'_>, result: &ExecResult) -> Value {
    let limit = output_limit(cx.policy);
    let (stdout, cut_out) =
        crate::redact::head_tail(&String::from_utf8_lossy(&result.stdout), limit);
    let (stderr, cut_err) =
        crate::redact::head_tail(&String::from_utf8_lossy(&result.stderr), limit);
    serde_json::json!({
        "exit_code": result.exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "timed_out": result.timed_out,
        "signal": result.signal,
        "oom_killed": result.oom_killed,
        "truncated": result.stdout_truncated || result.stderr_truncated || cut_out || cut_err,
        "duration_ms": result.duration_us / 1000,
    })
}
pub(crate) use artifacts::artifacts_dir;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_in_the_policy_catalogue_and_its_schema_compiles() {
        let entries = entries();
        let unknown: Vec<&str> = entries
            .iter()
            .map(|entry| entry.spec.name.as_str())
            .filter(|name| !forge_policy::catalog::is_tool(name))
            .collect();
        assert_eq!(unknown, Vec::<&str>::new());
        for entry in &entries {
            // An empty object is either accepted or refused naming a field: never "the
            // schema does not compile".
            if let Err(error) = entry.checker.check(&serde_json::json!({})) {
                assert!(error.field.is_some(), "{}: {error:?}", entry.spec.name);
            }
        }
    }

    #[test]
    fn tool_catalogue() {
        let specs: Vec<ToolSpec> = entries().into_iter().map(|entry| entry.spec).collect();
        insta::assert_json_snapshot!(specs);
    }
}
