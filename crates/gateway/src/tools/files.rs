//! File tools. Every operation runs inside the sandbox's mount namespace through the backend,
//! so no spelling of a path reaches the host; the policy judges the normalized path first.

use forge_policy::ToolCall;
use forge_types::FileKind;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Cx, Tool, WORKSPACE, failed, invalid, output_limit, resolve, sandbox_failed};
use crate::reply::ToolError;

/// Largest file `read_file` and `edit_file` load; larger files are read with `run_command`
/// tools such as `head` or through `search_in_files`.
const READ_LIMIT: u64 = 16 << 20;

/// Files `search_in_files` scans at most, and the largest file it reads.
const SEARCH_FILES: usize = 5000;
const SEARCH_FILE_BYTES: u64 = 1 << 20;

fn default_dir() -> String {
    WORKSPACE.to_owned()
}

/// List a directory's entries.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListDirectory {
    /// Directory to list; relative paths are under /workspace.
    #[serde(default = "default_dir")]
    path: String,
}

impl Tool for ListDirectory {
    const NAME: &'static str = "list_directory";
    const DESCRIPTION: &'static str =
        "List the entries of a directory in the sandbox, sorted by name, with their type and size.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).read(resolve("path", &self.path)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let path = resolve("path", &self.path)?;
        let mut entries = cx
            .backend
            .list_dir(cx.sandbox, &path)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let entries: Vec<Value> = entries
            .iter()
            .map(|info| {
                json!({
                    "name": info.name,
                    "type": kind_name(info.kind),
                    "size": info.size,
                })
            })
            .collect();
        Ok(json!({ "path": path, "count": entries.len(), "entries": entries }))
    }
}

pub(crate) fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "file",
        FileKind::Dir => "dir",
        FileKind::Symlink => "symlink",
        FileKind::Other => "other",
    }
}

/// Read a text file, whole or a range of lines.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadFile {
    /// File to read; relative paths are under /workspace.
    path: String,
    /// First line to return (1-based).
    #[schemars(range(min = 1))]
    start_line: Option<u64>,
    /// Last line to return (inclusive).
    #[schemars(range(min = 1))]
    end_line: Option<u64>,
    /// Most bytes of content to return (never more than the session's max_output_bytes).
    #[schemars(range(min = 1))]
    max_bytes: Option<u64>,
}

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a text file from the sandbox, optionally a range of lines; long content is cut to a head and tail.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        if let (Some(start), Some(end)) = (self.start_line, self.end_line)
            && end < start
        {
            return Err(invalid("end_line", "must not be before start_line"));
        }
        Ok(ToolCall::new(Self::NAME).read(resolve("path", &self.path)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let path = resolve("path", &self.path)?;
        let bytes = read_capped(cx, &path).await?;
        let text = String::from_utf8_lossy(&bytes);
        let total_lines = text.lines().count();
        let ranged = self.start_line.is_some() || self.end_line.is_some();
        let content = if ranged {
            let start = usize::try_from(self.start_line.unwrap_or(1)).unwrap_or(usize::MAX);
            let end = self
                .end_line
                .and_then(|end| usize::try_from(end).ok())
                .unwrap_or(usize::MAX);
            let mut out = String::new();
            for line in text
                .split_inclusive('\n')
                .skip(start - 1)
                .take(end.saturating_sub(start - 1))
            {
                out.push_str(line);
            }
            out
        } else {
            text.into_owned()
        };
        let limit = self
            .max_bytes
            .and_then(|max| usize::try_from(max).ok())
            .map_or(output_limit(cx.policy), |max| {
                max.min(output_limit(cx.policy))
            });
        let (content, truncated) = crate::redact::head_tail(&content, limit);
        Ok(json!({
            "path": path,
            "content": content,
            "bytes": bytes.len(),
            "total_lines": total_lines,
            "truncated": truncated,
        }))
    }
}

/// Reads a regular file of at most [`READ_LIMIT`] bytes.
pub(crate) async fn read_capped(cx: &Cx<'_>, path: &str) -> Result<Vec<u8>, ToolError> {
    let info = cx
        .backend
        .stat(cx.sandbox, path)
        .await
        .map_err(|e| sandbox_failed(&e))?;
    if info.kind == FileKind::Dir {
        return Err(failed(format!("{path} is a directory; use list_directory")));
    }
    if info.size > READ_LIMIT {
        return Err(failed(format!(
            "{path} has {} bytes, more than the {READ_LIMIT} this tool reads; read it in pieces with run_command",
            info.size
        )));
    }
    cx.backend
        .read_file(cx.sandbox, path)
        .await
        .map_err(|e| sandbox_failed(&e))
}

/// Write a file, creating its parent directories.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteFile {
    /// File to write; relative paths are under /workspace.
    path: String,
    /// The whole new content (UTF-8).
    content: String,
}

impl Tool for WriteFile {
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Write a text file in the sandbox (replacing it if it exists), creating parent directories.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).write(resolve("path", &self.path)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let path = resolve("path", &self.path)?;
        write(cx, &path, self.content.into_bytes())
            .await
            .map(|bytes| json!({ "path": path, "bytes": bytes }))
    }
}

/// Writes `data` at `path`, creating its parent directory; returns the byte count.
pub(crate) async fn write(cx: &Cx<'_>, path: &str, data: Vec<u8>) -> Result<usize, ToolError> {
    if let Some((parent, _)) = path.rsplit_once('/')
        && !parent.is_empty()
    {
        cx.backend
            .mkdir(cx.sandbox, parent)
            .await
            .map_err(|e| sandbox_failed(&e))?;
    }
    let bytes = data.len();
    cx.backend
        .write_file(cx.sandbox, path, data, None)
        .await
        .map_err(|e| sandbox_failed(&e))?;
    Ok(bytes)
}

/// Replace one exact, unique string in a file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditFile {
    /// File to edit; relative paths are under /workspace.
    path: String,
    /// Text to replace; it must occur exactly once in the file.
    #[schemars(length(min = 1))]
    old_string: String,
    /// Text to put in its place.
    new_string: String,
}

impl Tool for EditFile {
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Replace an exact string that occurs exactly once in a file; fails without changing anything when it occurs zero or several times.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        let path = resolve("path", &self.path)?;
        Ok(ToolCall::new(Self::NAME).read(path.clone()).write(path))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let path = resolve("path", &self.path)?;
        let bytes = read_capped(cx, &path).await?;
        let text =
            String::from_utf8(bytes).map_err(|_| failed(format!("{path} is not UTF-8 text")))?;
        let count = text.matches(&self.old_string).count();
        if count != 1 {
            return Err(invalid(
                "old_string",
                if count == 0 {
                    format!("does not occur in {path}")
                } else {
                    format!("occurs {count} times in {path}; include more context so it is unique")
                },
            ));
        }
        let edited = text.replacen(&self.old_string, &self.new_string, 1);
        let bytes = write(cx, &path, edited.into_bytes()).await?;
        Ok(json!({ "path": path, "replacements": 1, "bytes": bytes }))
    }
}

/// Delete a file or directory.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeletePath {
    /// Path to delete; relative paths are under /workspace.
    path: String,
    /// Delete a directory and everything in it.
    #[serde(default)]
    recursive: bool,
}

impl Tool for DeletePath {
    const NAME: &'static str = "delete_path";
    const DESCRIPTION: &'static str =
        "Delete a file, or a directory (recursive must be true unless it is empty).";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).write(resolve("path", &self.path)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let path = resolve("path", &self.path)?;
        if cx.policy.writable_paths.contains(&path) {
            return Err(invalid(
                "path",
                format!("{path} is a writable root; use session_reset to empty it"),
            ));
        }
        cx.backend
            .remove(cx.sandbox, &path, self.recursive)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        Ok(json!({ "path": path, "deleted": true }))
    }
}

/// Move or rename a file or directory.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MovePath {
    /// Path to move; relative paths are under /workspace.
    source: String,
    /// Where it goes; its parent directories are created.
    destination: String,
}

impl Tool for MovePath {
    const NAME: &'static str = "move_path";
    const DESCRIPTION: &'static str = "Move or rename a file or directory inside the sandbox.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        let source = resolve("source", &self.source)?;
        Ok(ToolCall::new(Self::NAME)
            .read(source.clone())
            .write(source)
            .write(resolve("destination", &self.destination)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let source = resolve("source", &self.source)?;
        let destination = resolve("destination", &self.destination)?;
        cx.backend
            .rename(cx.sandbox, &source, &destination)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        Ok(json!({ "source": source, "destination": destination }))
    }
}

/// Search files under a directory for a regular expression.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchInFiles {
    /// Directory to search; relative paths are under /workspace.
    #[serde(default = "default_dir")]
    root: String,
    /// Regular expression (Rust syntax, linear time), matched line by line.
    #[schemars(length(min = 1))]
    pattern: String,
    /// Most matches to return.
    #[schemars(range(min = 1, max = 2000))]
    max_results: Option<usize>,
}

impl Tool for SearchInFiles {
    const NAME: &'static str = "search_in_files";
    const DESCRIPTION: &'static str = "Search the files under a directory for a regular expression, line by line; skips .git and dependency folders, binary files and secret files.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        Ok(ToolCall::new(Self::NAME).read(resolve("root", &self.root)?))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let root = resolve("root", &self.root)?;
        let mut matcher =
            crate::analysis::Matcher::new(&self.pattern, self.max_results.unwrap_or(200))
                .map_err(|message| invalid("pattern", message))?;
        let files = walk(cx, &root, SEARCH_FILES).await?;
        let mut truncated = files.truncated;
        for file in files.files {
            if file.size > SEARCH_FILE_BYTES || cx.policy.conceals(&file.path) {
                continue;
            }
            let Ok(bytes) = cx.backend.read_file(cx.sandbox, &file.path).await else {
                continue;
            };
            let relative = file
                .path
                .strip_prefix(&root)
                .map_or(file.path.as_str(), |rest| rest.trim_start_matches('/'));
            if !matcher.add(relative, &bytes) {
                break;
            }
        }
        let (hits, scanned, capped) = matcher.finish();
        truncated |= capped;
        Ok(json!({
            "root": root,
            "count": hits.len(),
            "hits": hits,
            "files_scanned": scanned,
            "truncated": truncated,
        }))
    }
}

/// Regular files found under a directory.
pub(crate) struct Walked {
    pub(crate) files: Vec<forge_types::FileInfo>,
    pub(crate) truncated: bool,
}

/// Lists the regular files under `root` (not following symlinks, skipping dependency and version-control folders),
/// at most `limit` of them, in a stable order.
pub(crate) async fn walk(cx: &Cx<'_>, root: &str, limit: usize) -> Result<Walked, ToolError> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_owned()];
    let mut truncated = false;
    while let Some(dir) = pending.pop() {
        let mut entries = cx
            .backend
            .list_dir(cx.sandbox, &dir)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        entries.sort_by(|a, b| b.name.cmp(&a.name));
        for entry in entries {
            match entry.kind {
                FileKind::Dir if !crate::analysis::is_ignored_dir(&entry.name) => {
                    pending.push(entry.path);
                }
                FileKind::File => {
                    if files.len() == limit {
                        truncated = true;
                        break;
                    }
                    files.push(entry);
                }
                FileKind::Dir | FileKind::Symlink | FileKind::Other => {}
            }
        }
        if truncated {
            break;
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Walked { files, truncated })
}
