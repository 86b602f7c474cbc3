//! Files inside a sandbox as the file API reports them.

use serde::{Deserialize, Serialize};

/// What kind of file a path names (symlinks are reported, not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One file's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Absolute path inside the sandbox.
    pub path: String,
    pub name: String,
    pub kind: FileKind,
    pub size: u64,
    /// Permission bits (`0o644`), without the file type.
    pub mode: u32,
    /// Last modification, in milliseconds since the Unix epoch.
    pub modified_ms: i64,
    /// Where a symlink points.
    pub link_target: Option<String>,
}

impl FileInfo {
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }
}
