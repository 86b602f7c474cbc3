//! Artifacts and session state: files copied out of the sandbox into the data directory
//! (never following symlinks, never copying secret files unless the policy allows), and the
//! reset that stops every process and empties the writable directories.

use std::path::{Path, PathBuf};

use forge_policy::ToolCall;
use forge_types::FileKind;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::walk;
use super::process::stop;
use super::{Cx, Tool, WORKSPACE, failed, invalid, resolve, sandbox_failed};
use crate::reply::ToolError;

/// Largest single artifact, and most files and bytes one export copies.
const ARTIFACT_BYTES: u64 = 64 << 20;
const EXPORT_FILES: usize = 2000;
const EXPORT_BYTES: u64 = 256 << 20;

/// The file name an artifact gets: the source's last component, made safe.
fn artifact_name(path: &str) -> String {
    let name: String = path
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    if name.is_empty() || name.chars().all(|c| c == '.') {
        "artifact".to_owned()
    } else {
        name
    }
}

async fn save(dir: &Path, relative: &str, data: Vec<u8>) -> Result<(), ToolError> {
    let path = dir.join(relative);
    tokio::task::spawn_blocking(move || {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, data)
    })
    .await
    .map_err(|_| failed("the artifact copy was interrupted"))?
    .map_err(|error| {
        tracing::warn!(%error, "cannot write an artifact");
        failed("the artifact could not be written to the data directory")
    })
}

/// Copy one file out of the sandbox.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExportArtifact {
    /// File to export; relative paths are under /workspace.
    source_path: String,
}

impl Tool for ExportArtifact {
    const NAME: &'static str = "export_artifact";
    const DESCRIPTION: &'static str = "Copy one file out of the sandbox into the session's artifacts (listed by the API), replacing an earlier artifact of the same name.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).read(resolve("source_path", &self.source_path)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let path = resolve("source_path", &self.source_path)?;
        let info = cx
            .backend
            .stat(cx.sandbox, &path)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        if info.kind != FileKind::File {
            return Err(invalid(
                "source_path",
                format!("{path} is not a regular file"),
            ));
        }
        if info.size > ARTIFACT_BYTES {
            return Err(failed(format!(
                "{path} has {} bytes, more than the {ARTIFACT_BYTES} an artifact may have",
                info.size
            )));
        }
        let data = cx
            .backend
            .read_file(cx.sandbox, &path)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        let name = artifact_name(&path);
        let bytes = data.len();
        save(cx.artifacts, &name, data).await?;
        Ok(json!({ "artifact": name, "bytes": bytes }))
    }
}

/// Copy a directory tree out of the sandbox.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExportArtifacts {
    /// Directory to export; relative paths are under /workspace.
    #[serde(default = "workspace")]
    source_dir: String,
}

fn workspace() -> String {
    WORKSPACE.to_owned()
}

impl Tool for ExportArtifacts {
    const NAME: &'static str = "export_artifacts";
    const DESCRIPTION: &'static str = "Copy a directory tree out of the sandbox into the session's artifacts, without symlinks, dependency folders or secret files.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).read(resolve("source_dir", &self.source_dir)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let root = resolve("source_dir", &self.source_dir)?;
        let walked = walk(cx, &root, EXPORT_FILES).await?;
        let base = artifact_name(&root);
        let mut copied = 0usize;
        let mut bytes = 0u64;
        let mut skipped = Vec::new();
        for file in walked.files {
            if cx.policy.conceals(&file.path) {
                skipped.push(file.path);
                continue;
            }
            if bytes + file.size > EXPORT_BYTES {
                skipped.push(file.path);
                continue;
            }
            let relative = file
                .path
                .strip_prefix(&root)
                .unwrap_or(&file.path)
                .trim_start_matches('/')
                .to_owned();
            let Ok(data) = cx.backend.read_file(cx.sandbox, &file.path).await else {
                skipped.push(file.path);
                continue;
            };
            bytes += data.len() as u64;
            save(cx.artifacts, &format!("{base}/{relative}"), data).await?;
            copied += 1;
        }
        Ok(json!({
            "artifact_dir": base,
            "file_count": copied,
            "bytes": bytes,
            "skipped": skipped,
            "truncated": walked.truncated,
        }))
    }
}

/// Wipe the session's state.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionReset {}

impl Tool for SessionReset {
    const NAME: &'static str = "session_reset";
    const DESCRIPTION: &'static str = "Stop every process of the session and empty its writable directories (/workspace, /tmp), as when it started.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let processes = cx
            .backend
            .processes(cx.sandbox)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        let mut stopped = 0usize;
        for process in &processes {
            if process.state == forge_types::ProcessState::Running {
                stop(cx, process).await?;
                stopped += 1;
            }
        }
        let mut removed = 0usize;
        for dir in ["/workspace", "/tmp"] {
            let entries = cx
                .backend
                .list_dir(cx.sandbox, dir)
                .await
                .map_err(|e| sandbox_failed(&e))?;
            for entry in entries {
                cx.backend
                    .remove(cx.sandbox, &entry.path, true)
                    .await
                    .map_err(|e| sandbox_failed(&e))?;
                removed += 1;
            }
        }
        Ok(json!({ "status": "active", "processes_stopped": stopped, "entries_removed": removed }))
    }
}

/// The artifacts directory of a session under the data directory.
pub(crate) fn artifacts_dir(data_dir: &Path, session: &str) -> PathBuf {
    data_dir.join("artifacts").join(session)
}
