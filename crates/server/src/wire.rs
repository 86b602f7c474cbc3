//! The JSON shapes of the HTTP API. The `/api/v1/sandboxes…`, `/templates…`, `/providers…`,
//! `/snapshots`, `/pool/status`, `/health` and `/metrics` bodies follow ForgeVM's wire
//! contract key by key (its SDKs parse them); Forge's additions (processes, terminals,
//! richer exec results) only add keys or routes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A sandbox as ForgeVM's clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Sandbox {
    /// `sb-` and eight hex digits.
    pub id: String,
    /// `running` or `destroyed` (destroyed sandboxes are not listed).
    pub state: String,
    pub provider: String,
    pub image: String,
    pub memory_mb: u64,
    pub vcpus: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// RFC 3339 time.
    pub created_at: String,
    pub expires_at: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub metadata: BTreeMap<String, String>,
    /// Limits this host could not enforce for this sandbox (a Forge addition).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub degraded: Vec<String>,
}

/// `POST /sandboxes`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct SpawnRequest {
    /// Image name; the server's default image when empty.
    pub image: String,
    /// Only `jail` (or empty) is accepted.
    pub provider: String,
    /// Memory limit in MiB; the default when 0.
    pub memory_mb: i64,
    /// CPU quota in CPUs; the default when 0.
    pub vcpus: i64,
    /// Go duration (`30m`, `1h30m`); the default TTL when empty.
    pub ttl: String,
    /// Spawn from this template (a Forge addition: ForgeVM ignored it).
    pub template: String,
    pub owner_id: String,
    pub metadata: BTreeMap<String, String>,
    /// `none` (the default), `allowlist` or `open` (a Forge addition); a template's
    /// allowed hosts imply `allowlist`.
    pub network: String,
    /// Destinations for `allowlist`: names, `*.` wildcards, addresses, CIDRs, each with an
    /// optional `:port` (a Forge addition).
    pub allowed_hosts: Vec<String>,
}

/// `POST /sandboxes/{id}/exec` (also the first WebSocket message).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct ExecRequest {
    /// Run by `/bin/sh -c`, with `args` appended shell-quoted.
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub workdir: String,
    /// Go duration; the process group is killed when it passes.
    pub timeout: String,
    /// Answer with NDJSON lines `{"stream","data"}` as output arrives.
    pub stream: bool,
    /// With `stream`, end with one more line: `{"type":"exit","exit_code":…}` (opt-in, since
    /// ForgeVM's SDKs would read it as output).
    pub exit_event: bool,
    /// Bytes written to stdin (a Forge addition).
    pub stdin: Option<String>,
    /// Bytes kept of each of stdout and stderr (a Forge addition).
    pub max_output_bytes: Option<u64>,
}

/// How a command ended.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts about one run, as clients read them"
)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExecResult {
    /// The exit status; -1 when a signal ended the process (as ForgeVM reports it).
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Go duration.
    pub duration: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub oom_killed: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// One NDJSON line of a streamed exec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StreamChunk {
    /// `stdout` or `stderr`.
    pub stream: String,
    pub data: String,
}

/// The opt-in last line of a streamed exec, and the last WebSocket message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExitEvent {
    /// `exit` on the NDJSON stream, `done` on the WebSocket.
    #[serde(rename = "type")]
    pub kind: String,
    pub exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub oom_killed: bool,
    pub duration: String,
}

/// A file's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FileInfo {
    pub path: String,
    pub size: u64,
    /// Octal permission bits (`644`); directories as Go prints them (`20000000755`).
    pub mode: String,
    pub is_dir: bool,
    /// RFC 3339 time.
    pub mod_time: String,
    /// The base name (a Forge addition; ForgeVM's TypeScript SDK declares it).
    pub name: String,
}

/// `POST /sandboxes/{id}/files`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct FileWrite {
    pub path: String,
    /// The file's text (ForgeVM sends plain strings, not base64).
    pub content: String,
    /// Octal mode, `0644` by default.
    pub mode: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct FileMove {
    pub old_path: String,
    pub new_path: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct FileChmod {
    pub path: String,
    pub mode: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct ExtendRequest {
    /// Go duration; the new expiry is now plus this.
    pub ttl: String,
}

/// `{"status": …}` replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Status {
    pub status: String,
}

impl Status {
    pub fn new(status: &str) -> Self {
        Self {
            status: status.to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Pruned {
    pub pruned: u64,
}

/// A sandbox template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct Template {
    pub name: String,
    pub version: i64,
    pub image: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Commands run in each new sandbox of the template before it is handed out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    pub memory_mb: i64,
    pub cpu_cores: i64,
    pub ttl_seconds: i64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<TemplateSecret>,
    /// Warm sandboxes kept ready, so that spawning from the template is a hand-off.
    pub pool_size: i64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct TemplateSecret {
    pub name: String,
    pub inject_at: String,
}

/// `POST /templates/{name}/spawn` (optional body).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct TemplateSpawn {
    pub provider: String,
    pub ttl: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProviderInfo {
    pub name: String,
    pub healthy: bool,
    pub default: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProviderDetail {
    pub name: String,
    pub healthy: bool,
    pub default: bool,
    pub sandbox_count: u64,
    pub config: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SnapshotSummary {
    pub image: String,
    pub provider: String,
    pub created_at: String,
}

/// `GET /pool/status`. ForgeVM's keys describe shared VMs; Forge's pool is a cap on live
/// sandboxes (`vms` = live sandboxes, `max_vms` = the cap, one user each) plus warm pools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PoolStatus {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_vms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_users: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_users_per_vm: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overflow: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued: Option<u64>,
    /// Warm sandboxes ready per template.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub warm: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
    pub version: String,
    /// Go duration.
    pub uptime: String,
}

/// ForgeVM's JSON metrics (`goroutines` counts Forge's live tasks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Metrics {
    pub goroutines: u64,
    pub memory_alloc: u64,
    pub active_sandboxes: u64,
    pub total_sandboxes: u64,
}

/// An event on `/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Event {
    /// Monotonic; resume with `Last-Event-ID`.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_id: Option<String>,
    pub timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
}

/// Every error: a stable code and a message for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

/// `POST /sandboxes/{id}/processes`: a background process (a Forge addition).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct ProcessStart {
    /// Run by `/bin/sh -c`.
    pub command: String,
    /// The argument vector; when set, `command` is ignored and no shell is involved.
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub workdir: String,
    pub tag: String,
    /// Run under a terminal of this size.
    pub pty: Option<PtySize>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PtySize {
    pub cols: u16,
    pub rows: u16,
}

/// A background process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Process {
    pub id: u32,
    pub pid: i32,
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    pub pty: bool,
    /// `running` or `exited`.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub output_bytes: u64,
}

/// Output read from a cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProcessLogs {
    pub chunks: Vec<StreamChunk>,
    /// Pass back as `cursor` to read what comes next.
    pub next_cursor: u64,
    /// Bytes that were asked for but have left the retained window.
    pub dropped: u64,
    pub process: Process,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct ProcessStdin {
    pub data: String,
    /// Close stdin after writing (end of file).
    pub close: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(default)]
pub struct ProcessSignal {
    /// A signal number or name (`TERM`, `SIGKILL`, `9`); `TERM` when empty.
    pub signal: String,
}

/// An image in the store (a Forge addition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Image {
    /// The name as people write it: `alpine:latest`.
    pub name: String,
    /// Fully qualified: `docker.io/library/alpine:latest`.
    pub reference: String,
    /// Digest of the image's configuration.
    pub id: String,
    /// Digest of the manifest it was pulled by.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub digest: Option<String>,
    pub layers: usize,
    pub size_bytes: u64,
    pub created_at: String,
    /// `host`, `registry`, `archive`, `debian`, `snapshot` or `template`.
    pub source: String,
    /// Where it came from: the registry, archive path, suite, sandbox or template.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub origin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub parent: Option<String>,
}

impl From<forge_types::ImageInfo> for Image {
    fn from(info: forge_types::ImageInfo) -> Self {
        use forge_types::ImageSource;
        let origin = match &info.source {
            ImageSource::Host => None,
            ImageSource::Registry { registry } => Some(registry.clone()),
            ImageSource::Archive { path, .. } => Some(path.clone()),
            ImageSource::Debian { suite, packages } if packages.is_empty() => Some(suite.clone()),
            ImageSource::Debian { suite, packages } => {
                Some(format!("{suite} + {}", packages.join(",")))
            }
            ImageSource::Snapshot { sandbox } => Some(sandbox.clone()),
            ImageSource::Template { template } => Some(template.clone()),
        };
        Self {
            source: info.source.kind().to_owned(),
            name: info.name,
            reference: info.reference,
            id: info.id,
            digest: info.digest,
            layers: info.layers,
            size_bytes: info.size_bytes,
            created_at: info.created_at,
            origin,
            parent: info.parent,
        }
    }
}

/// `POST /images/pull`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PullRequest {
    /// `alpine:latest`, `ghcr.io/org/tool:1`, `name@sha256:…`.
    pub reference: String,
}

/// `POST /images/build`: a Debian root file system built with `mmdebstrap`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BuildRequest {
    /// Name of the image to create.
    pub name: String,
    /// Debian suite; `bookworm` when empty.
    pub suite: String,
    pub packages: Vec<String>,
    /// `essential`, `apt` (the default), `required`, `minbase` or `important`.
    pub variant: String,
    /// Debian mirror URL; the host's when empty.
    pub mirror: String,
}

/// `POST /sandboxes/{id}/snapshot`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SnapshotRequest {
    /// Name of the new image; `snapshot/<sandbox id>:<unix time>` when empty.
    pub name: String,
}

/// `POST /sandboxes/{id}/fork`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ForkRequest {
    /// Lifetime of the fork, as a Go duration; the server's default when empty.
    pub ttl: String,
}

/// What removing or pruning images freed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImagesPruned {
    pub images: Vec<String>,
    pub layers: usize,
    pub freed_bytes: u64,
}

impl From<forge_types::PruneReport> for ImagesPruned {
    fn from(report: forge_types::PruneReport) -> Self {
        Self {
            images: report.images,
            layers: report.layers,
            freed_bytes: report.freed_bytes,
        }
    }
}

/// One outbound connection attempt of a sandbox (a Forge addition): `GET
/// /sandboxes/{id}/connections` and the `sandbox.connection` event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Connection {
    pub id: i64,
    pub sandbox_id: String,
    /// RFC 3339.
    pub started_at: String,
    /// `connect` (a tunnel, HTTPS) or `http` (a plain request).
    pub kind: String,
    /// The destination as the sandbox named it.
    pub host: String,
    pub port: i64,
    /// The address the proxy resolved the host to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// `allowed` or `refused`.
    pub verdict: String,
    /// Why the attempt was refused (or why an allowed one failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub bytes_up: i64,
    pub bytes_down: i64,
    pub duration_ms: i64,
}

impl From<forge_store::ConnectionRecord> for Connection {
    fn from(record: forge_store::ConnectionRecord) -> Self {
        Self {
            id: record.id,
            sandbox_id: record.sandbox_id,
            started_at: crate::time::rfc3339(record.started_at_ms),
            kind: record.kind,
            host: record.host,
            port: record.port,
            address: record.address,
            verdict: record.verdict,
            reason: record.reason,
            bytes_up: record.bytes_up,
            bytes_down: record.bytes_down,
            duration_ms: record.duration_ms,
        }
    }
}

/// `POST /sandboxes/{id}/ports` (a Forge addition).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ExposeRequest {
    /// The port inside the sandbox (its server may listen on 127.0.0.1 or 0.0.0.0).
    pub port: u16,
    /// The host port; a free one when absent or 0.
    pub host_port: Option<u16>,
}

/// A sandbox port reachable from the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PortForward {
    pub port: u16,
    /// `address:port` on the host.
    pub host_address: String,
}

impl From<forge_types::PortForward> for PortForward {
    fn from(forward: forge_types::PortForward) -> Self {
        Self {
            port: forward.port,
            host_address: forward.host_address,
        }
    }
}
