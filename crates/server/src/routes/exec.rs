//! `/sandboxes/{id}/exec`: run a command to completion, or stream its output as NDJSON,
//! or over a WebSocket.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use forge_types::units::GoDuration;
use forge_types::{Command, ExecEvent, ExecResult, SandboxId, StreamKind};
use futures::StreamExt;
use http_body::Frame;
use http_body_util::StreamBody;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::Json;
use crate::manager::Manager;
use crate::time::now_ms;
use crate::wire;

/// Quotes `arg` for `/bin/sh` (single quotes, with embedded ones escaped).
fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return arg.to_owned();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// Translates a wire request: `command` runs through `/bin/sh -c` with `args` appended
/// shell-quoted (ForgeVM's semantics); the timeout is enforced.
pub(crate) fn to_request(
    request: &wire::ExecRequest,
    default_timeout: Option<Duration>,
) -> Result<forge_types::ExecRequest, ApiError> {
    if request.command.trim().is_empty() {
        return Err(ApiError::field("command", "must not be empty"));
    }
    let mut script = request.command.clone();
    for arg in &request.args {
        script.push(' ');
        script.push_str(&shell_quote(arg));
    }
    for name in request.env.keys() {
        forge_types::sandbox::validate_env_name(name)
            .map_err(|reason| ApiError::field("env", reason))?;
    }
    let timeout = super::sandboxes::ttl_field("timeout", &request.timeout)?.or(default_timeout);
    let mut exec = forge_types::ExecRequest::new(Command::Shell(script));
    exec.env = request.env.clone();
    exec.cwd = Some(request.workdir.clone()).filter(|w| !w.is_empty());
    exec.stdin = request.stdin.clone().map(String::into_bytes);
    exec.timeout_ms = timeout
        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
        .filter(|ms| *ms > 0);
    exec.output_limit = request.max_output_bytes;
    Ok(exec)
}

pub(crate) fn result_to_wire(result: &ExecResult) -> wire::ExecResult {
    wire::ExecResult {
        exit_code: if result.signal.is_some() {
            -1
        } else {
            result.exit_code
        },
        stdout: String::from_utf8_lossy(&result.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&result.stderr).into_owned(),
        duration: GoDuration(Duration::from_micros(result.duration_us)).to_string(),
        signal: result.signal,
        timed_out: result.timed_out,
        oom_killed: result.oom_killed,
        stdout_truncated: result.stdout_truncated,
        stderr_truncated: result.stderr_truncated,
    }
}

fn exit_event(kind: &str, result: &ExecResult) -> wire::ExitEvent {
    wire::ExitEvent {
        kind: kind.to_owned(),
        exit_code: if result.signal.is_some() {
            -1
        } else {
            result.exit_code
        },
        signal: result.signal,
        timed_out: result.timed_out,
        oom_killed: result.oom_killed,
        duration: GoDuration(Duration::from_micros(result.duration_us)).to_string(),
    }
}

/// Turns byte chunks into text without splitting a UTF-8 sequence across two chunks:
/// an incomplete sequence at the end of a chunk waits for the next one.
#[derive(Debug, Default)]
struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    fn push(&mut self, data: &[u8]) -> String {
        self.pending.extend_from_slice(data);
        let keep = incomplete_tail(&self.pending);
        let complete = self.pending.len() - keep;
        let text = String::from_utf8_lossy(&self.pending[..complete]).into_owned();
        self.pending.drain(..complete);
        text
    }

    fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

/// Length of an unfinished UTF-8 sequence at the end of `bytes` (0 to 3).
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=3.min(bytes.len()) {
        let byte = bytes[bytes.len() - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue;
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

fn ndjson_line<T: serde::Serialize>(value: &T) -> Bytes {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// Run a command (`stream: true` answers NDJSON lines as output arrives).
#[utoipa::path(post, path = "/sandboxes/{id}/exec", tag = "exec", params(("id" = String, Path)), request_body = wire::ExecRequest,
    responses(
        (status = 200, description = "the result, or with `stream` NDJSON lines `{\"stream\",\"data\"}` (the exit code in the `X-Exit-Code` trailer for clients that send `TE: trailers`, or as a last `{\"type\":\"exit\"}` line with `exit_event`)", body = wire::ExecResult),
        (status = 400, body = wire::ErrorBody), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn exec(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Json(request): Json<wire::ExecRequest>,
) -> Result<Response, ApiError> {
    let id = Manager::parse_id(&id)?;
    let exec = to_request(&request, state.config().default_exec_timeout)?;
    if !request.stream {
        let result = state.manager().exec(&id, exec).await?;
        return Ok(axum::Json(result_to_wire(&result)).into_response());
    }
    let command = exec.command.display();
    let started_ms = now_ms();
    let clock = Instant::now();
    let events = state.manager().backend().exec_stream(&id, exec).await?;
    let exit_line = request.exit_event;
    let (mut out, mut err) = (Utf8Carry::default(), Utf8Carry::default());
    let body = events
        .map(move |event| {
            let frames: Vec<Frame<Bytes>> = match event {
                Ok(ExecEvent::Output { stream, data }) => {
                    let carry = match stream {
                        StreamKind::Stdout => &mut out,
                        StreamKind::Stderr => &mut err,
                    };
                    let text = carry.push(&data);
                    if text.is_empty() {
                        Vec::new()
                    } else {
                        vec![Frame::data(ndjson_line(&wire::StreamChunk {
                            stream: stream.as_str().to_owned(),
                            data: text,
                        }))]
                    }
                }
                Ok(ExecEvent::Exit(result)) => {
                    let mut frames = Vec::new();
                    for (stream, carry) in [("stdout", &mut out), ("stderr", &mut err)] {
                        let text = carry.finish();
                        if !text.is_empty() {
                            frames.push(Frame::data(ndjson_line(&wire::StreamChunk {
                                stream: stream.to_owned(),
                                data: text,
                            })));
                        }
                    }
                    state.manager().log_exec(
                        &id,
                        &command,
                        &result,
                        started_ms,
                        clock.elapsed(),
                        true,
                    );
                    if exit_line {
                        frames.push(Frame::data(ndjson_line(&exit_event("exit", &result))));
                    }
                    frames.push(Frame::trailers(exit_trailers(&result)));
                    frames
                }
                // After the 200 is sent, a failure can only end the body early.
                Err(failure) => {
                    tracing::warn!(error = %failure, "streamed exec ended early");
                    Vec::new()
                }
            };
            futures::stream::iter(frames.into_iter().map(Ok::<_, Infallible>))
        })
        .flatten();
    let mut response = Response::new(Body::new(StreamBody::new(body)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::TRAILER,
        HeaderValue::from_static("X-Exit-Code, X-Exit-Signal"),
    );
    Ok(response)
}

fn exit_trailers(result: &ExecResult) -> HeaderMap {
    let mut trailers = HeaderMap::new();
    let code = if result.signal.is_some() {
        -1
    } else {
        result.exit_code
    };
    if let Ok(value) = HeaderValue::from_str(&code.to_string()) {
        trailers.insert("x-exit-code", value);
    }
    if let Some(signal) = result.signal
        && let Ok(value) = HeaderValue::from_str(&signal.to_string())
    {
        trailers.insert("x-exit-signal", value);
    }
    trailers
}

/// Run a command over a WebSocket: send one `ExecRequest` as text, receive `{"stream","data"}`
/// messages, then `{"type":"done","exit_code":…}` and a normal close.
#[utoipa::path(get, path = "/sandboxes/{id}/exec/ws", tag = "exec", params(("id" = String, Path)),
    responses((status = 101, description = "WebSocket upgrade"), (status = 404, body = wire::ErrorBody)))]
pub(crate) async fn exec_ws(
    State(state): State<AppState>,
    Path(id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let id = Manager::parse_id(&id)?;
    state.manager().backend().get(&id).await?;
    Ok(upgrade.on_upgrade(move |socket| run_ws(state, id, socket)))
}

async fn run_ws(state: AppState, id: SandboxId, mut socket: WebSocket) {
    let close = |code: u16, reason: &str| {
        Message::Close(Some(CloseFrame {
            code,
            reason: reason.to_owned().into(),
        }))
    };
    let request = loop {
        match socket.recv().await {
            Some(Ok(Message::Text(text))) => {
                if let Ok(request) = serde_json::from_str::<wire::ExecRequest>(&text) {
                    break request;
                }
                let _ = socket.send(close(1007, "invalid request")).await;
                return;
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            _ => return,
        }
    };

    let exec = match to_request(&request, state.config().default_exec_timeout) {
        Ok(exec) => exec,
        Err(err) => {
            let _ = socket
                .send(Message::Text(
                    serde_json::json!({"error": err.message}).to_string().into(),
                ))
                .await;
            let _ = socket.send(close(1011, "exec failed")).await;
            return;
        }
    };
    let command = exec.command.display();
    let started_ms = now_ms();
    let clock = Instant::now();
    let mut events = match state.manager().backend().exec_stream(&id, exec).await {
        Ok(events) => events,
        Err(err) => {
            let err = ApiError::from(err);
            let _ = socket
                .send(Message::Text(
                    serde_json::json!({"error": err.message}).to_string().into(),
                ))
                .await;
            let _ = socket.send(close(1011, "exec failed")).await;
            return;
        }
    };
    let (mut out, mut err) = (Utf8Carry::default(), Utf8Carry::default());
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(ExecEvent::Output { stream, data })) => {
                    let carry = if stream == StreamKind::Stdout { &mut out } else { &mut err };
                    let text = carry.push(&data);
                    if text.is_empty() {
                        continue;
                    }
                    let chunk = wire::StreamChunk { stream: stream.as_str().to_owned(), data: text };
                    if socket.send(Message::Text(serde_json::to_string(&chunk).unwrap_or_default().into())).await.is_err() {
                        return;
                    }
                }
                Some(Ok(ExecEvent::Exit(result))) => {
                    for (stream, carry) in [("stdout", &mut out), ("stderr", &mut err)] {
                        let text = carry.finish();
                        if !text.is_empty() {
                            let chunk = wire::StreamChunk { stream: stream.to_owned(), data: text };
                            let _ = socket.send(Message::Text(serde_json::to_string(&chunk).unwrap_or_default().into())).await;
                        }
                    }
                    state.manager().log_exec(&id, &command, &result, started_ms, clock.elapsed(), true);
                    let done = serde_json::to_string(&exit_event("done", &result)).unwrap_or_default();
                    let _ = socket.send(Message::Text(done.into())).await;
                    let _ = socket.send(close(1000, "")).await;
                    return;
                }
                Some(Err(failure)) => {
                    let _ = socket.send(Message::Text(serde_json::json!({"error": failure.to_string()}).to_string().into())).await;
                    let _ = socket.send(close(1011, "exec failed")).await;
                    return;
                }
                None => return,
            },
            // A closed socket drops `events`, which kills the command.
            message = socket.recv() => match message {
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn args_are_quoted_for_the_shell() {
        let request = wire::ExecRequest {
            command: "printf".into(),
            args: vec!["%s\n".into(), "it's".into(), "plain".into()],
            ..Default::default()
        };
        let exec = to_request(&request, None).unwrap();
        assert_eq!(
            exec.command,
            Command::Shell(
                r"printf '%s
' 'it'\''s' plain"
                    .into()
            )
        );
    }

    #[test]
    fn utf8_sequences_split_across_chunks_are_kept_whole() {
        let text = "héllo ✓";
        let bytes = text.as_bytes();
        let mut carry = Utf8Carry::default();
        let mut out = String::new();
        for chunk in bytes.chunks(1) {
            out.push_str(&carry.push(chunk));
        }
        out.push_str(&carry.finish());
        assert_eq!(out, text);
    }

    #[test]
    fn bad_timeouts_and_empty_commands_name_the_field() {
        let bad = wire::ExecRequest {
            command: "true".into(),
            timeout: "soon".into(),
            ..Default::default()
        };
        assert_eq!(
            to_request(&bad, None).unwrap_err().message,
            "invalid timeout: invalid number in \"soon\""
        );
        let empty = wire::ExecRequest::default();
        assert_eq!(
            to_request(&empty, None).unwrap_err().message,
            "invalid command: must not be empty"
        );
    }
}
