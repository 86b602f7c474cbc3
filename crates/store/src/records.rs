//! The rows the store reads and writes, as plain data.
//!
//! These mirror the tables one to one (JSON columns decoded); turning them into API or domain
//! types is the caller's business. Times are milliseconds since the Unix epoch.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One sandbox, live or destroyed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxRecord {
    pub id: String,
    /// [`SandboxRecord::RUNNING`] or [`SandboxRecord::DESTROYED`].
    pub state: String,
    pub image: String,
    pub provider: String,
    pub memory_mb: i64,
    pub vcpus: i64,
    pub owner_id: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub spec: serde_json::Value,
    pub template: Option<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub destroyed_at_ms: Option<i64>,
    pub destroy_reason: Option<String>,
    /// The host pid of the sandbox's init while it runs.
    pub init_pid: Option<i64>,
}

impl SandboxRecord {
    /// The state of a sandbox that has not been destroyed.
    pub const RUNNING: &'static str = "running";
    /// The state [`Store::mark_destroyed`](crate::Store::mark_destroyed) sets.
    pub const DESTROYED: &'static str = "destroyed";
}

/// How many sandboxes the store knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxCounts {
    /// Rows not destroyed.
    pub active: i64,
    /// All rows, destroyed included.
    pub total: i64,
}

/// A named recipe for sandboxes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateRecord {
    pub name: String,
    pub version: i64,
    pub image: String,
    pub description: Option<String>,
    /// Commands run once when a sandbox is created from the template.
    pub setup: Vec<String>,
    pub allowed_hosts: Vec<String>,
    pub memory_mb: i64,
    pub cpu_cores: i64,
    pub ttl_seconds: i64,
    pub env: BTreeMap<String, String>,
    pub secrets: serde_json::Value,
    /// Warm sandboxes to keep ready.
    pub pool_size: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// A command that ran in a sandbox, about to be logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewExec {
    pub sandbox_id: String,
    pub command: String,
    pub exit_code: i64,
    /// The signal that ended the command, if one did.
    pub signal: Option<i64>,
    pub duration_us: i64,
    pub started_at_ms: i64,
    pub timed_out: bool,
    pub oom_killed: bool,
    /// Whether the output was streamed to the client rather than returned at the end.
    pub streamed: bool,
}

/// A logged command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRecord {
    pub id: i64,
    pub sandbox_id: String,
    pub command: String,
    pub exit_code: i64,
    pub signal: Option<i64>,
    pub duration_us: i64,
    pub started_at_ms: i64,
    pub timed_out: bool,
    pub oom_killed: bool,
    pub streamed: bool,
}

impl ExecRecord {
    /// The record `exec` becomes once stored under `id`.
    pub fn new(id: i64, exec: NewExec) -> ExecRecord {
        let NewExec {
            sandbox_id,
            command,
            exit_code,
            signal,
            duration_us,
            started_at_ms,
            timed_out,
            oom_killed,
            streamed,
        } = exec;
        ExecRecord {
            id,
            sandbox_id,
            command,
            exit_code,
            signal,
            duration_us,
            started_at_ms,
            timed_out,
            oom_killed,
            streamed,
        }
    }
}

/// An event about to be appended to the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewEvent {
    pub kind: String,
    pub sandbox_id: Option<String>,
    pub timestamp_ms: i64,
    pub data: Option<serde_json::Value>,
}

/// An event in the stream; ids grow strictly in the order events were appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    pub id: i64,
    pub kind: String,
    pub sandbox_id: Option<String>,
    pub timestamp_ms: i64,
    pub data: Option<serde_json::Value>,
}

impl EventRecord {
    /// The record `event` becomes once stored under `id`.
    pub fn new(id: i64, event: NewEvent) -> EventRecord {
        let NewEvent {
            kind,
            sandbox_id,
            timestamp_ms,
            data,
        } = event;
        EventRecord {
            id,
            kind,
            sandbox_id,
            timestamp_ms,
            data,
        }
    }
}

/// One outbound connection attempt of a sandbox, as its egress proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct ConnectionRecord {
    pub id: i64,
    pub sandbox_id: String,
    pub started_at_ms: i64,
    /// `connect` or `http`.
    pub kind: String,
    pub host: String,
    pub port: i64,
    pub address: Option<String>,
    /// `allowed` or `refused`.
    pub verdict: String,
    pub reason: Option<String>,
    pub bytes_up: i64,
    pub bytes_down: i64,
    pub duration_ms: i64,
}
