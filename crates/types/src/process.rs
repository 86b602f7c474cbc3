//! Background processes: started, listed, signalled and read from a cursor while the client
//! that started them comes and goes. A PTY session is a background process with a terminal.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::exec::{Command, StreamKind};

/// A background process's id, unique within its sandbox for the sandbox's lifetime.
pub type ProcessId = u32;

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtySize {
    pub cols: u16,
    pub rows: u16,
}

impl Default for PtySize {
    fn default() -> Self {
        Self { cols: 80, rows: 24 }
    }
}

/// A process to start in the background.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSpec {
    pub command: Command,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// Run under a pseudo-terminal of this size instead of pipes.
    #[serde(default)]
    pub pty: Option<PtySize>,
    /// A name chosen by the caller, shown in listings.
    #[serde(default)]
    pub tag: Option<String>,
}

impl ProcessSpec {
    pub fn new(command: Command) -> Self {
        Self {
            command,
            env: BTreeMap::new(),
            cwd: None,
            pty: None,
            tag: None,
        }
    }
}

/// Whether a process still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum ProcessState {
    Running,
    Exited { exit_code: i32, signal: Option<i32> },
}

/// A background process as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub id: ProcessId,
    /// Pid inside the sandbox.
    pub pid: i32,
    pub command: String,
    pub tag: Option<String>,
    pub pty: bool,
    pub state: ProcessState,
    /// Total bytes of output produced so far (the end cursor).
    pub output_bytes: u64,
}

/// Output a process wrote, with its position in the process's whole output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    /// Offset of the first byte of `data` in the process's combined output.
    pub cursor: u64,
    pub stream: StreamKind,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// A read of a process's output from a cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessOutput {
    pub chunks: Vec<OutputChunk>,
    /// Pass this back to read what comes next.
    pub next_cursor: u64,
    /// Bytes between the requested cursor and the oldest byte still kept, which were
    /// dropped because the process wrote more than its retained-output window.
    pub dropped: u64,
    pub state: ProcessState,
}
