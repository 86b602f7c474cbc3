//! `/sandboxes/{id}/processes…` and `/sandboxes/{id}/pty` (Forge's additions): background
//! processes that outlive the request that started them, their output from a cursor, stdin,
//! signals, and interactive terminals over a WebSocket.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use forge_types::{Command, ExecEvent, ProcessInfo, ProcessSpec, ProcessState, PtySize, SandboxId};
use futures::StreamExt;
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{Json, OptionalJson};
use crate::manager::Manager;
use crate::wire;

pub(crate) fn process_to_wire(info: &ProcessInfo) -> wire::Process {
    let (state, exit_code, signal) = match info.state {
        ProcessState::Running => ("running", None, None),
        ProcessState::Exited { exit_code, signal } => ("exited", Some(exit_code), signal),
    };
    wire::Process {
        id: info.id,
        pid: info.pid,
        command: info.command.clone(),
        tag: info.tag.clone(),
        pty: info.pty,
        state: state.to_owned(),
        exit_code,
        signal,
        output_bytes: info.output_bytes,
    }
}

/// A signal by number or name (`TERM`, `SIGKILL`, `9`).
fn parse_signal(text: &str) -> Result<i32, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(libc_signal("TERM"));
    }
    if let Ok(number) = text.parse::<i32>() {
        return if (1..=64).contains(&number) {
            Ok(number)
        } else {
            Err(ApiError::field(
                "signal",
                format!("{number} is not a signal number"),
            ))
        };
    }
    let name = text.trim_start_matches("SIG").to_ascii_uppercase();
    match libc_signal(&name) {
        0 => Err(ApiError::field(
            "signal",
            format!("unknown signal {text:?}"),
        )),
        number => Ok(number),
    }
}

fn libc_signal(name: &str) -> i32 {
    match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        "CONT" => 18,
        "STOP" => 19,
        "WINCH" => 28,
        _ => 0,
    }
}

fn process_id(text: &str) -> Result<u32, ApiError> {
    text.parse()
        .map_err(|_| ApiError::not_found(format!("no background process with id {text}")))
}

/// Start a background process.
#[utoipa::path(post, path = "/sandboxes/{id}/processes", tag = "processes", params(("id" = String, Path)), request_body = wire::ProcessStart,
    responses((status = 201, body = wire::Process), (status = 400, body = wire::ErrorBody), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn start(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<wire::ProcessStart>,
) -> Result<(StatusCode, axum::Json<wire::Process>), ApiError> {
    let id = Manager::parse_id(&id)?;
    let command = if request.argv.is_empty() {
        if request.command.trim().is_empty() {
            return Err(ApiError::bad_request("command or argv is required"));
        }
        Command::Shell(request.command.clone())
    } else {
        Command::Argv(request.argv.clone())
    };
    let spec = ProcessSpec {
        command,
        env: request.env.clone(),
        cwd: Some(request.workdir.clone()).filter(|w| !w.is_empty()),
        pty: request.pty.map(|p| PtySize {
            cols: p.cols.max(1),
            rows: p.rows.max(1),
        }),
        tag: Some(request.tag.clone()).filter(|t| !t.is_empty()),
    };
    let info = state.manager().backend().spawn(&id, spec).await?;
    state.manager().events().publish(
        "process.started",
        Some(id.as_str()),
        Some(serde_json::json!({"process": info.id, "command": info.command})),
    );
    Ok((StatusCode::CREATED, axum::Json(process_to_wire(&info))))
}

/// List background processes.
#[utoipa::path(get, path = "/sandboxes/{id}/processes", tag = "processes", params(("id" = String, Path)), responses((status = 200, body = [wire::Process])))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<Vec<wire::Process>>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let processes = state.manager().backend().processes(&id).await?;
    Ok(axum::Json(processes.iter().map(process_to_wire).collect()))
}

/// One background process.
#[utoipa::path(get, path = "/sandboxes/{id}/processes/{process}", tag = "processes", params(("id" = String, Path), ("process" = u32, Path)),
    responses((status = 200, body = wire::Process), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path((id, process)): Path<(String, String)>,
) -> Result<axum::Json<wire::Process>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let process = process_id(&process)?;
    let info = state
        .manager()
        .backend()
        .wait(&id, process, Some(0))
        .await
        .map_err(not_found_process)?;
    Ok(axum::Json(process_to_wire(&info)))
}

/// Kill a background process (SIGKILL to its process group).
#[utoipa::path(delete, path = "/sandboxes/{id}/processes/{process}", tag = "processes", params(("id" = String, Path), ("process" = u32, Path)),
    responses((status = 200, body = wire::Status)))]
pub(crate) async fn kill(
    State(state): State<AppState>,
    Path((id, process)): Path<(String, String)>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    state
        .manager()
        .backend()
        .signal(&id, process_id(&process)?, 9)
        .await
        .map_err(not_found_process)?;
    Ok(axum::Json(wire::Status::new("killed")))
}

#[derive(Debug, Deserialize)]
pub(crate) struct LogsQuery {
    cursor: Option<u64>,
    max_bytes: Option<u64>,
    wait_ms: Option<u64>,
}

/// Output from a cursor, waiting up to `wait_ms` for some when there is none yet.
#[utoipa::path(get, path = "/sandboxes/{id}/processes/{process}/logs", tag = "processes",
    params(("id" = String, Path), ("process" = u32, Path), ("cursor" = Option<u64>, Query), ("max_bytes" = Option<u64>, Query), ("wait_ms" = Option<u64>, Query)),
    responses((status = 200, body = wire::ProcessLogs)))]
pub(crate) async fn logs(
    State(state): State<AppState>,
    Path((id, process)): Path<(String, String)>,
    Query(query): Query<LogsQuery>,
) -> Result<axum::Json<wire::ProcessLogs>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let process = process_id(&process)?;
    let backend = state.manager().backend();
    let output = backend
        .read_output(
            &id,
            process,
            query.cursor.unwrap_or(0),
            query.max_bytes.unwrap_or(1 << 20),
            query.wait_ms.unwrap_or(0).min(60_000),
        )
        .await
        .map_err(not_found_process)?;
    let info = backend
        .wait(&id, process, Some(0))
        .await
        .map_err(not_found_process)?;
    Ok(axum::Json(wire::ProcessLogs {
        chunks: output
            .chunks
            .iter()
            .map(|c| wire::StreamChunk {
                stream: c.stream.as_str().to_owned(),
                data: String::from_utf8_lossy(&c.data).into_owned(),
            })
            .collect(),
        next_cursor: output.next_cursor,
        dropped: output.dropped,
        process: process_to_wire(&info),
    }))
}

/// Write to a process's stdin.
#[utoipa::path(post, path = "/sandboxes/{id}/processes/{process}/stdin", tag = "processes", params(("id" = String, Path), ("process" = u32, Path)),
    request_body = wire::ProcessStdin, responses((status = 200, body = wire::Status)))]
pub(crate) async fn stdin(
    State(state): State<AppState>,
    Path((id, process)): Path<(String, String)>,
    Json(request): Json<wire::ProcessStdin>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    state
        .manager()
        .backend()
        .write_stdin(
            &id,
            process_id(&process)?,
            request.data.into_bytes(),
            request.close,
        )
        .await
        .map_err(not_found_process)?;
    Ok(axum::Json(wire::Status::new("written")))
}

/// Send a signal to a process's group.
#[utoipa::path(post, path = "/sandboxes/{id}/processes/{process}/signal", tag = "processes", params(("id" = String, Path), ("process" = u32, Path)),
    request_body = wire::ProcessSignal, responses((status = 200, body = wire::Status)))]
pub(crate) async fn signal(
    State(state): State<AppState>,
    Path((id, process)): Path<(String, String)>,
    OptionalJson(request): OptionalJson<wire::ProcessSignal>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let signal = parse_signal(&request.signal)?;
    state
        .manager()
        .backend()
        .signal(&id, process_id(&process)?, signal)
        .await
        .map_err(not_found_process)?;
    Ok(axum::Json(wire::Status::new("signalled")))
}

#[derive(Debug, Deserialize)]
pub(crate) struct WaitQuery {
    timeout_ms: Option<u64>,
}

/// Wait for a process to exit (up to `timeout_ms`, 30 s at most).
#[utoipa::path(post, path = "/sandboxes/{id}/processes/{process}/wait", tag = "processes",
    params(("id" = String, Path), ("process" = u32, Path), ("timeout_ms" = Option<u64>, Query)), responses((status = 200, body = wire::Process)))]
pub(crate) async fn wait(
    State(state): State<AppState>,
    Path((id, process)): Path<(String, String)>,
    Query(query): Query<WaitQuery>,
) -> Result<axum::Json<wire::Process>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let timeout = query.timeout_ms.unwrap_or(30_000).min(30_000);
    let info = state
        .manager()
        .backend()
        .wait(&id, process_id(&process)?, Some(timeout))
        .await
        .map_err(not_found_process)?;
    Ok(axum::Json(process_to_wire(&info)))
}

/// Resize a process's terminal.
#[utoipa::path(post, path = "/sandboxes/{id}/processes/{process}/resize", tag = "processes", params(("id" = String, Path), ("process" = u32, Path)),
    request_body = wire::PtySize, responses((status = 200, body = wire::Status)))]
pub(crate) async fn resize(
    State(state): State<AppState>,
    Path((id, process)): Path<(String, String)>,
    Json(size): Json<wire::PtySize>,
) -> Result<axum::Json<wire::Status>, ApiError> {
    let id = Manager::parse_id(&id)?;
    let size = PtySize {
        cols: size.cols.max(1),
        rows: size.rows.max(1),
    };
    state
        .manager()
        .backend()
        .resize(&id, process_id(&process)?, size)
        .await
        .map_err(not_found_process)?;
    Ok(axum::Json(wire::Status::new("resized")))
}

/// A missing process is a 404 (the sandbox exists, so the SDK's mapping does not apply).
fn not_found_process(err: forge_sandbox::SandboxError) -> ApiError {
    if err.remote_kind() == Some(forge_sandbox::proto::ErrorKind::NoSuchProcess) {
        return ApiError::not_found(err.to_string());
    }
    err.into()
}

#[derive(Debug, Deserialize)]
pub(crate) struct TerminalQuery {
    command: Option<String>,
    cols: Option<u16>,
    rows: Option<u16>,
}

/// An interactive terminal over a WebSocket. Binary messages (or `{"type":"input","data"}`)
/// go to the terminal; `{"type":"resize","cols","rows"}` resizes it; its output comes back
/// as binary messages, then `{"type":"exit","exit_code"}`. Closing the socket hangs up.
#[utoipa::path(get, path = "/sandboxes/{id}/pty", tag = "processes",
    params(("id" = String, Path), ("command" = Option<String>, Query), ("cols" = Option<u16>, Query), ("rows" = Option<u16>, Query)),
    responses((status = 101, description = "WebSocket upgrade"), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn terminal(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<TerminalQuery>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let id = Manager::parse_id(&id)?;
    let size = PtySize {
        cols: query.cols.unwrap_or(80).max(1),
        rows: query.rows.unwrap_or(24).max(1),
    };
    let command = query.command.filter(|c| !c.trim().is_empty()).map_or_else(
        || {
            Command::Shell(
                "if command -v bash >/dev/null; then exec bash -l; else exec sh -l; fi".into(),
            )
        },
        Command::Shell,
    );
    let info = state
        .manager()
        .backend()
        .spawn(
            &id,
            ProcessSpec {
                pty: Some(size),
                tag: Some("terminal".into()),
                ..ProcessSpec::new(command)
            },
        )
        .await?;
    Ok(upgrade.on_upgrade(move |socket| run_terminal(state, id, info.id, socket)))
}

async fn run_terminal(state: AppState, id: SandboxId, process: u32, mut socket: WebSocket) {
    let backend = state.manager().backend().clone();
    let Ok(mut output) = backend.attach(&id, process, 0).await else {
        let _ = backend.signal(&id, process, 9).await;
        return;
    };
    loop {
        tokio::select! {
            event = output.next() => match event {
                Some(Ok(ExecEvent::Output { data, .. })) => {
                    if socket.send(Message::Binary(data.into())).await.is_err() {
                        break;
                    }
                }
                Some(Ok(ExecEvent::Exit(result))) => {
                    let exit = serde_json::json!({"type": "exit", "exit_code": result.exit_code, "signal": result.signal});
                    let _ = socket.send(Message::Text(exit.to_string().into())).await;
                    let _ = socket.send(Message::Close(None)).await;
                    return;
                }
                Some(Err(_)) | None => break,
            },
            message = socket.recv() => match message {
                Some(Ok(Message::Binary(data))) => {
                    if backend.write_stdin(&id, process, data.to_vec(), false).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Text(text))) => match serde_json::from_str::<serde_json::Value>(&text) {
                    Ok(control) if control["type"] == "resize" => {
                        let dimension = |key: &str| control[key].as_u64().and_then(|v| u16::try_from(v).ok()).unwrap_or(0).max(1);
                        let _ = backend.resize(&id, process, PtySize { cols: dimension("cols"), rows: dimension("rows") }).await;
                    }
                    Ok(control) if control["type"] == "input" => {
                        let data = control["data"].as_str().unwrap_or_default().as_bytes().to_vec();
                        if backend.write_stdin(&id, process, data, false).await.is_err() {
                            break;
                        }
                    }
                    _ => {
                        if backend.write_stdin(&id, process, text.as_bytes().to_vec(), false).await.is_err() {
                            break;
                        }
                    }
                },
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            },
        }
    }
    // The client went away: hang up the terminal's session, as closing a terminal does.
    let _ = backend.signal(&id, process, 1).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_or_number() {
        let parsed: Vec<Result<i32, String>> = ["", "TERM", "SIGKILL", "9", "int", "0", "NOPE"]
            .iter()
            .map(|s| parse_signal(s).map_err(|e| e.message))
            .collect();
        assert_eq!(
            parsed,
            [
                Ok(15),
                Ok(15),
                Ok(9),
                Ok(9),
                Ok(2),
                Err("invalid signal: 0 is not a signal number".to_owned()),
                Err("invalid signal: unknown signal \"NOPE\"".to_owned())
            ]
        );
    }
}
