//! Process tools: background processes started by argv (a shell only when the policy allows
//! one), stopped with their whole group, logs read from a cursor, and probes of the
//! sandbox's own ports — run inside the sandbox against loopback, never from the host, so no
//! request can reach anything but the session's own services.

use forge_policy::ToolCall;
use forge_types::{Command, ExecRequest, ProcessInfo, ProcessSpec, ProcessState};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Cx, Tool, WORKSPACE, exec, failed, invalid, output_limit, resolve, sandbox_failed};
use crate::reply::ToolError;

/// How long `stop_process` waits after SIGTERM before SIGKILL.
const STOP_GRACE_MS: u64 = 3000;

/// A command: an argument vector, or (only when the policy allows a shell) a command line.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum CommandLine {
    Argv(Vec<String>),
    Shell(String),
}

fn check_name(name: &str) -> Result<(), ToolError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "name",
            "must be 1 to 64 ASCII letters, digits, '.', '_' or '-'",
        ))
    }
}

/// Start a background process.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartProcess {
    /// Working directory; relative paths are under /workspace.
    repo_dir: Option<String>,
    /// A name to refer to the process by (stop_process, stream_logs).
    name: String,
    /// Program and arguments, e.g. ["npm", "run", "dev"]; a string (run by sh -c) only when
    /// the session's policy allows a shell.
    command: CommandLine,
    /// The port the process will listen on, for check_port and http_health_check.
    port: Option<u16>,
}

impl StartProcess {
    fn argv(&self) -> Vec<String> {
        match &self.command {
            CommandLine::Argv(argv) => argv.clone(),
            CommandLine::Shell(line) => vec!["sh".to_owned(), "-c".to_owned(), line.clone()],
        }
    }
}

impl Tool for StartProcess {
    const NAME: &'static str = "start_process";
    const DESCRIPTION: &'static str = "Start a named background process in the sandbox from an argument vector on the session's command allowlist (a shell string only when the policy allows a shell).";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        check_name(&self.name)?;
        if let Some(dir) = &self.repo_dir {
            resolve("repo_dir", dir)?;
        }
        if matches!(&self.command, CommandLine::Argv(argv) if argv.is_empty()) {
            return Err(invalid("command", "must name a program"));
        }
        Ok(ToolCall::new(Self::NAME).command(self.argv()))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let cwd = match &self.repo_dir {
            Some(dir) => resolve("repo_dir", dir)?,
            None => WORKSPACE.to_owned(),
        };
        if find(cx, &self.name)
            .await?
            .is_some_and(|p| p.state == ProcessState::Running)
        {
            return Err(invalid(
                "name",
                format!("a process named {:?} is already running", self.name),
            ));
        }
        let spec = ProcessSpec {
            command: match self.command {
                CommandLine::Argv(argv) => Command::Argv(argv),
                CommandLine::Shell(line) => Command::Shell(line),
            },
            env: std::collections::BTreeMap::new(),
            cwd: Some(cwd),
            pty: None,
            tag: Some(self.name.clone()),
        };
        let info = cx
            .backend
            .spawn(cx.sandbox, spec)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        Ok(json!({
            "name": self.name,
            "id": info.id,
            "pid": info.pid,
            "port": self.port,
        }))
    }
}

/// The newest process with this name.
async fn find(cx: &Cx<'_>, name: &str) -> Result<Option<ProcessInfo>, ToolError> {
    let processes = cx
        .backend
        .processes(cx.sandbox)
        .await
        .map_err(|e| sandbox_failed(&e))?;
    Ok(processes
        .into_iter()
        .filter(|p| p.tag.as_deref() == Some(name))
        .max_by_key(|p| p.state == ProcessState::Running))
}

async fn require(cx: &Cx<'_>, name: &str) -> Result<ProcessInfo, ToolError> {
    find(cx, name)
        .await?
        .ok_or_else(|| invalid("name", format!("no process is named {name:?}")))
}

/// Stop a background process.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StopProcess {
    /// The name start_process was given.
    name: String,
}

impl Tool for StopProcess {
    const NAME: &'static str = "stop_process";
    const DESCRIPTION: &'static str = "Stop a named background process and its children: SIGTERM, then SIGKILL after a grace period.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        check_name(&self.name)?;
        Ok(ToolCall::new(Self::NAME))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let process = require(cx, &self.name).await?;
        let state = stop(cx, &process).await?;
        Ok(json!({ "name": self.name, "stopped": true, "state": state }))
    }
}

/// Stops one process: SIGTERM, a grace period, then SIGKILL.
pub(crate) async fn stop(cx: &Cx<'_>, process: &ProcessInfo) -> Result<ProcessState, ToolError> {
    if process.state != ProcessState::Running {
        return Ok(process.state);
    }
    let signal = |signal| cx.backend.signal(cx.sandbox, process.id, signal);
    // A process that exits between the listing and the signal is stopped all the same.
    let _ = signal(libc_sigterm()).await;
    let waited = cx
        .backend
        .wait(cx.sandbox, process.id, Some(STOP_GRACE_MS))
        .await
        .map_err(|e| sandbox_failed(&e))?;
    if waited.state != ProcessState::Running {
        return Ok(waited.state);
    }
    let _ = signal(libc_sigkill()).await;
    let waited = cx
        .backend
        .wait(cx.sandbox, process.id, Some(STOP_GRACE_MS))
        .await
        .map_err(|e| sandbox_failed(&e))?;
    Ok(waited.state)
}

const fn libc_sigterm() -> i32 {
    15
}

const fn libc_sigkill() -> i32 {
    9
}

/// Read a background process's output.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamLogs {
    /// The name start_process was given.
    name: String,
    /// Where to continue from: the next_cursor of the previous call (0 for the start).
    #[serde(default)]
    cursor: u64,
    /// Most bytes to return (never more than the session's max_output_bytes).
    #[schemars(range(min = 1))]
    max_bytes: Option<u64>,
}

impl Tool for StreamLogs {
    const NAME: &'static str = "stream_logs";
    const DESCRIPTION: &'static str = "Read a named background process's output (stdout and stderr interleaved) from a cursor; returns the next cursor and whether the process still runs.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        check_name(&self.name)?;
        Ok(ToolCall::new(Self::NAME))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let process = require(cx, &self.name).await?;
        let limit = self
            .max_bytes
            .unwrap_or(cx.policy.max_output_bytes)
            .min(cx.policy.max_output_bytes);
        let output = cx
            .backend
            .read_output(cx.sandbox, process.id, self.cursor, limit, 0)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        let mut logs = Vec::new();
        for chunk in &output.chunks {
            logs.extend_from_slice(&chunk.data);
        }
        let (logs, _) =
            crate::redact::head_tail(&String::from_utf8_lossy(&logs), output_limit(cx.policy));
        let (running, exit_code) = match output.state {
            ProcessState::Running => (true, None),
            ProcessState::Exited { exit_code, .. } => (false, Some(exit_code)),
        };
        Ok(json!({
            "name": self.name,
            "logs": logs,
            "next_cursor": output.next_cursor,
            "dropped": output.dropped,
            "running": running,
            "exit_code": exit_code,
        }))
    }
}

/// Hosts that name the sandbox itself.
fn own_host(field: &str, host: &str) -> Result<(), ToolError> {
    if matches!(host, "127.0.0.1" | "localhost" | "::1" | "[::1]") {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!(
                "{host:?} is not the sandbox itself; only the sandbox's own ports (127.0.0.1) can be probed"
            ),
        ))
    }
}

/// The probe: a TCP connect, or an HTTP GET that does not follow redirects, from inside the
/// sandbox. Prints one JSON line.
const PROBE: &str = r#"
import json, re, socket, sys, urllib.request, urllib.error
kind, host, port, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if kind == "port":
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(1.5)
    try:
        s.connect((host, port)); print(json.dumps({"open": True}))
    except OSError:
        print(json.dumps({"open": False}))
    sys.exit(0)
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
opener = urllib.request.build_opener(NoRedirect)
url = "http://%s:%d%s" % (host if ":" not in host else "[" + host + "]", port, path)
if kind == "preview":
    try:
        with opener.open(url, timeout=3) as r:
            status, body = r.status, r.read(65536)
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read(65536)
    except Exception as e:
        print(json.dumps({"ok": False, "error": type(getattr(e, "reason", e)).__name__}))
        sys.exit(0)
    text = body.decode("utf-8", "replace")
    title = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
    hint = " ".join((title.group(1) if title else text).split())[:120]
    print(json.dumps({"ok": 200 <= status < 400, "status": status, "title_hint": hint}))
    sys.exit(0)
try:
    with opener.open(url, timeout=5) as r:
        body = r.read(300).decode("utf-8", "replace")
        print(json.dumps({"ok": 200 <= r.status < 400, "status_code": r.status, "body": body}))
except urllib.error.HTTPError as e:
    print(json.dumps({"ok": False, "status_code": e.code, "body": e.read(300).decode("utf-8", "replace")}))
except Exception as e:
    print(json.dumps({"ok": False, "status_code": None, "error": type(e).__name__}))
"#;

async fn probe(
    cx: &Cx<'_>,
    kind: &str,
    host: &str,
    port: u16,
    path: &str,
) -> Result<Value, ToolError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let request = ExecRequest::argv(["python3", "-c", PROBE, kind, host, &port.to_string(), path]);
    let result = exec(cx, request, Some(10)).await?;
    serde_json::from_slice(&result.stdout).map_err(|_| {
        failed(format!(
            "the probe did not answer: {}",
            String::from_utf8_lossy(&result.stderr).trim()
        ))
    })
}

/// Check whether a port of the sandbox accepts connections.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckPort {
    port: u16,
    /// Only the sandbox itself: 127.0.0.1 (the default), localhost or ::1.
    #[serde(default = "loopback")]
    host: String,
}

fn loopback() -> String {
    "127.0.0.1".to_owned()
}

impl Tool for CheckPort {
    const NAME: &'static str = "check_port";
    const DESCRIPTION: &'static str = "Check whether a TCP port of the sandbox itself accepts connections (probed from inside the sandbox).";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        own_host("host", &self.host)?;
        Ok(ToolCall::new(Self::NAME).destination(self.host.clone(), Some(self.port)))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let mut value = probe(cx, "port", &self.host, self.port, "/").await?;
        value["host"] = json!(self.host);
        value["port"] = json!(self.port);
        Ok(value)
    }
}

/// GET a URL served by the sandbox itself.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpHealthCheck {
    /// http://127.0.0.1:PORT/PATH (or localhost): only the sandbox's own services.
    url: String,
}

/// Host, port and path of a loopback `http://` URL given in `field`.
fn loopback_url(field: &str, url: &str) -> Result<(String, u16, String), ToolError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        invalid(
            field,
            "must start with http:// (the sandbox's own services)",
        )
    })?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |at| rest.split_at(at));
    if authority.contains('@') {
        return Err(invalid(field, "must not carry credentials"));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (
            host,
            port.parse::<u16>()
                .map_err(|_| invalid(field, format!("{port:?} is not a port")))?,
        ),
        _ => (authority, 80),
    };
    own_host(field, host)?;
    if path.chars().any(char::is_whitespace) {
        return Err(invalid(field, "the path must not contain whitespace"));
    }
    Ok((host.to_owned(), port, path.to_owned()))
}

impl Tool for HttpHealthCheck {
    const NAME: &'static str = "http_health_check";
    const DESCRIPTION: &'static str = "GET a URL served by the sandbox itself (http://127.0.0.1:PORT/...), from inside the sandbox, without following redirects; returns the status and the start of the body.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        let (host, port, _) = loopback_url("url", &self.url)?;
        Ok(ToolCall::new(Self::NAME).destination(host, Some(port)))
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let (host, port, path) = loopback_url("url", &self.url)?;
        let mut value = probe(cx, "http", &host, port, &path).await?;
        value["url"] = json!(self.url);
        Ok(value)
    }
}

/// Lines of a process's log `capture_preview_metadata` returns, at most.
const PREVIEW_LOG_LINES: usize = 200;

/// Read a named process's latest log lines and, optionally, what the page it serves says.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CapturePreviewMetadata {
    /// The name start_process was given.
    name: String,
    /// The page to look at, http://127.0.0.1:PORT/PATH (only the sandbox's own services);
    /// without it only the logs are read.
    base_url: Option<String>,
}

impl Tool for CapturePreviewMetadata {
    const NAME: &'static str = "capture_preview_metadata";
    const DESCRIPTION: &'static str = "Summarise a named background process for a preview: its last 200 log lines, whether it still runs, and, given base_url (the sandbox's own http://127.0.0.1:PORT/...), the page's status and title, fetched from inside the sandbox with a 3 s timeout.";

    fn plan(&self) -> Result<ToolCall, ToolError> {
        check_name(&self.name)?;
        let call = ToolCall::new(Self::NAME);
        Ok(match &self.base_url {
            Some(url) => {
                let (host, port, _) = loopback_url("base_url", url)?;
                call.destination(host, Some(port))
            }
            None => call,
        })
    }

    async fn run(self, cx: &Cx<'_>) -> Result<Value, ToolError> {
        let process = require(cx, &self.name).await?;
        let (tail, cut, state) = log_tail(cx, &process).await?;
        let text = String::from_utf8_lossy(&tail);
        // A line cut by the tail's start is not shown half.
        let lines: Vec<&str> = text.lines().skip(usize::from(cut)).collect();
        let lines = &lines[lines.len().saturating_sub(PREVIEW_LOG_LINES)..];
        let (logs, _) = crate::redact::head_tail(&lines.join("\n"), output_limit(cx.policy));
        let health = match &self.base_url {
            Some(url) => {
                let (host, port, path) = loopback_url("base_url", url)?;
                probe(cx, "preview", &host, port, &path).await?
            }
            None => Value::Null,
        };
        let (running, exit_code) = match state {
            ProcessState::Running => (true, None),
            ProcessState::Exited { exit_code, .. } => (false, Some(exit_code)),
        };
        Ok(json!({
            "name": self.name,
            "base_url": self.base_url,
            "health": health,
            "log_lines": logs.lines().collect::<Vec<_>>(),
            "running": running,
            "exit_code": exit_code,
        }))
    }
}

/// The end of a process's output (what its window still holds, at most the last 64 KiB),
/// whether older output was left out, and the process's state.
async fn log_tail(
    cx: &Cx<'_>,
    process: &ProcessInfo,
) -> Result<(Vec<u8>, bool, ProcessState), ToolError> {
    const KEEP: usize = 64 << 10;
    let mut tail = Vec::new();
    let mut cut = false;
    let mut cursor = 0;
    loop {
        let output = cx
            .backend
            .read_output(cx.sandbox, process.id, cursor, 1 << 20, 0)
            .await
            .map_err(|e| sandbox_failed(&e))?;
        cut |= output.dropped > 0;
        for chunk in &output.chunks {
            tail.extend_from_slice(&chunk.data);
        }
        if tail.len() > KEEP {
            tail.drain(..tail.len() - KEEP);
            cut = true;
        }
        if output.chunks.is_empty() || output.next_cursor == cursor {
            return Ok((tail, cut, output.state));
        }
        cursor = output.next_cursor;
    }
}
