//! The init agent's event loop: accepts connections on the control socket and serves the
//! protocol of [`crate::proto`].
//!
//! Everything runs on one thread (a current-thread runtime with a `LocalSet`), so the agent
//! forks children from a single-threaded process and shares state through `Rc`/`RefCell`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use forge_types::{
    ExecRequest, ExecResult, ProcessId, ProcessInfo, ProcessOutput, ProcessSpec, ProcessState,
    PtySize, StreamKind,
};
use rustix::process::Signal;
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::init::files::{self, WORKSPACE};
use crate::init::output::{Capture, OutputLog};
use crate::init::spawn::{self, AsyncPipe, Children, Exit, Launch, LaunchError};
use crate::proto::{
    self, CHUNK, ErrorKind, FrameError, PROTOCOL_VERSION, RemoteError, Request, Response,
};
use crate::sys;

/// How long output is still collected after a command exited, for descendants that keep
/// its pipes open (`server &`). What they write later is drained and dropped.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// Bytes of recent output kept per background process.
const PROCESS_WINDOW: usize = 1 << 20;

/// Background processes remembered at once; exited ones are forgotten first.
const MAX_PROCESSES: usize = 1024;

/// Shared state of the agent.
#[derive(Debug)]
pub(crate) struct Agent {
    env: BTreeMap<String, String>,
    oom_events: Option<OwnedFd>,
    children: Rc<Children>,
    processes: RefCell<BTreeMap<ProcessId, Rc<Process>>>,
    next_id: Cell<ProcessId>,
}

/// A background process and its output.
#[derive(Debug)]
struct Process {
    id: ProcessId,
    pid: i32,
    command: String,
    tag: Option<String>,
    pty: bool,
    state: Cell<ProcessState>,
    log: RefCell<OutputLog>,
    changed: Notify,
    stdin: RefCell<Option<Rc<AsyncPipe>>>,
    terminal: Option<Rc<AsyncPipe>>,
}

impl Process {
    fn info(&self) -> ProcessInfo {
        ProcessInfo {
            id: self.id,
            pid: self.pid,
            command: self.command.clone(),
            tag: self.tag.clone(),
            pty: self.pty,
            state: self.state.get(),
            output_bytes: self.log.borrow().end(),
        }
    }

    fn output(&self, cursor: u64, max_bytes: u64) -> ProcessOutput {
        let (chunks, next_cursor, dropped) = self.log.borrow().read(cursor, max_bytes);
        ProcessOutput {
            chunks,
            next_cursor,
            dropped,
            state: self.state.get(),
        }
    }

    fn running(&self) -> bool {
        self.state.get() == ProcessState::Running
    }
}

impl Agent {
    pub(crate) fn new(env: BTreeMap<String, String>, oom_events: Option<OwnedFd>) -> Self {
        Self {
            env,
            oom_events,
            children: Rc::new(Children::default()),
            processes: RefCell::new(BTreeMap::new()),
            next_id: Cell::new(1),
        }
    }
}

/// Serves the control socket until the sandbox is destroyed (the init is killed).
pub(crate) fn serve(
    listener: std::os::unix::net::UnixListener,
    control: std::os::unix::net::UnixStream,
    agent: Agent,
) -> ! {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        sys::exit_immediately(70)
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let agent = Rc::new(agent);
        tokio::task::spawn_local(agent.children.clone().reap_forever());
        let accept = async {
            // The connection the init was born with needs no hello: the host end was made
            // together with this one.
            control.set_nonblocking(true)?;
            tokio::task::spawn_local(
                agent
                    .clone()
                    .serve_connection(UnixStream::from_std(control)?),
            );
            listener.set_nonblocking(true)?;
            let listener = tokio::net::UnixListener::from_std(listener)?;
            loop {
                let (stream, _) = listener.accept().await?;
                tokio::task::spawn_local(agent.clone().connection(stream));
            }
        };
        let result: io::Result<()> = accept.await;
        drop(result);
    });
    sys::exit_immediately(71)
}

fn error_frame(kind: ErrorKind, message: impl Into<String>) -> Response {
    Response::Error(RemoteError::new(kind, message))
}

impl Agent {
    async fn connection(self: Rc<Self>, stream: UnixStream) {
        let (mut reader, mut writer) = stream.into_split();
        match proto::read_frame(&mut reader).await {
            Ok(Some(Request::Hello { version })) if version == PROTOCOL_VERSION => {
                let hello = Response::Hello {
                    version: PROTOCOL_VERSION,
                    pid: 1,
                };
                if proto::write_frame(&mut writer, &hello).await.is_err() {
                    return;
                }
            }
            Ok(Some(Request::Hello { version })) => {
                let message = format!(
                    "protocol version {version} is not supported; this agent speaks {PROTOCOL_VERSION}"
                );
                let _ = proto::write_frame(&mut writer, &error_frame(ErrorKind::Protocol, message))
                    .await;
                return;
            }
            _ => {
                let _ = proto::write_frame(
                    &mut writer,
                    &error_frame(ErrorKind::Protocol, "expected hello"),
                )
                .await;
                return;
            }
        }
        self.serve_requests(reader, writer).await;
    }

    /// Serves the connection the init was born with (its hello is implied).
    async fn serve_connection(self: Rc<Self>, stream: UnixStream) {
        let (reader, writer) = stream.into_split();
        self.serve_requests(reader, writer).await;
    }

    async fn serve_requests(self: Rc<Self>, mut reader: OwnedReadHalf, mut writer: OwnedWriteHalf) {
        loop {
            let Ok(Some(request)) = proto::read_frame(&mut reader).await else {
                return;
            };
            if self
                .handle(request, &mut reader, &mut writer)
                .await
                .is_err()
            {
                return;
            }
        }
    }

    async fn handle(
        self: &Rc<Self>,
        request: Request,
        reader: &mut OwnedReadHalf,
        writer: &mut OwnedWriteHalf,
    ) -> Result<(), FrameError> {
        let response = match request {
            Request::Ping => Response::Pong,
            Request::Exec { request, stream } => {
                return self.exec(request, stream, reader, writer).await;
            }
            Request::Spawn { spec } => reply(self.spawn(spec).map(Response::Process)),
            Request::ListProcesses => Response::Processes {
                processes: self.processes.borrow().values().map(|p| p.info()).collect(),
            },
            Request::Signal { id, signal } => reply(self.signal(id, signal).map(|()| Response::Ok)),
            Request::WriteStdin { id, data, close } => reply(
                self.write_stdin(id, &data, close)
                    .await
                    .map(|()| Response::Ok),
            ),
            Request::ReadOutput {
                id,
                cursor,
                max_bytes,
                wait_ms,
            } => reply(
                self.read_output(id, cursor, max_bytes, wait_ms)
                    .await
                    .map(Response::ProcessOutput),
            ),
            Request::Attach { id, cursor } => return self.attach(id, cursor, reader, writer).await,
            Request::Wait { id, timeout_ms } => {
                reply(self.wait(id, timeout_ms).await.map(Response::Process))
            }
            Request::Resize { id, size } => reply(self.resize(id, size).map(|()| Response::Ok)),
            Request::ReadFile {
                path,
                offset,
                limit,
            } => return read_file(&path, offset, limit, writer).await,
            Request::WriteFile { path, mode, append } => {
                return write_file(&path, mode, append, reader, writer).await;
            }
            Request::ListDir { path } => {
                reply(files::list_dir(&path).map(|files| Response::Files { files }))
            }
            Request::Stat { path } => reply(files::stat(&path).map(Response::Stat)),
            Request::Mkdir { path, mode } => {
                reply(files::mkdir(&path, mode).map(|()| Response::Ok))
            }
            Request::Rename { from, to } => reply(files::rename(&from, &to).map(|()| Response::Ok)),
            Request::Chmod { path, mode } => {
                reply(files::chmod(&path, mode).map(|()| Response::Ok))
            }
            Request::Remove { path, recursive } => {
                reply(files::remove(&path, recursive).map(|()| Response::Ok))
            }
            Request::Glob { pattern } => {
                reply(files::glob(&pattern).map(|paths| Response::Paths { paths }))
            }
            Request::Socket { port, listen } => return socket(port, listen, writer).await,
            Request::Namespaces => return namespaces(writer).await,
            Request::Hello { .. } | Request::Chunk { .. } | Request::End => {
                error_frame(ErrorKind::Protocol, "unexpected frame outside an upload")
            }
        };
        proto::write_frame(writer, &response).await
    }

    /// The environment of a new process: the sandbox's, then the request's.
    fn env_for(&self, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut env = self.env.clone();
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    }

    fn oom_kills(&self) -> u64 {
        let Some(fd) = &self.oom_events else { return 0 };
        let mut buf = [0u8; 512];
        let n = rustix::io::pread(fd, &mut buf, 0).unwrap_or(0);
        std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(crate::cgroup::oom_kill_count)
            .unwrap_or(0)
    }

    async fn exec(
        &self,
        request: ExecRequest,
        stream: bool,
        reader: &mut OwnedReadHalf,
        writer: &mut OwnedWriteHalf,
    ) -> Result<(), FrameError> {
        let started = Instant::now();
        let argv = request.command.to_argv();
        let env = self.env_for(&request.env);
        let cwd = request.cwd.as_deref().unwrap_or(WORKSPACE);
        let pipes = (|| -> io::Result<_> {
            let (out_r, out_w) = spawn::pipe()?;
            let (err_r, err_w) = spawn::pipe()?;
            let (stdin_child, stdin_ours) = match request.stdin {
                Some(_) => {
                    let (r, w) = spawn::pipe()?;
                    (r, Some(w))
                }
                None => (spawn::dev_null()?, None),
            };
            Ok((out_r, out_w, err_r, err_w, stdin_child, stdin_ours))
        })();
        let (out_r, out_w, err_r, err_w, stdin_child, stdin_ours) = match pipes {
            Ok(pipes) => pipes,
            Err(err) => {
                return proto::write_frame(
                    writer,
                    &error_frame(ErrorKind::Other, format!("cannot create pipes: {err}")),
                )
                .await;
            }
        };
        let oom_before = self.oom_kills();
        let launched = spawn::launch(
            &self.children,
            Launch {
                argv: &argv,
                env: &env,
                cwd,
                stdin: stdin_child,
                stdout: out_w,
                stderr: err_w,
                tty: false,
            },
        );
        let (pid, mut exit_rx) = match launched {
            Ok(launched) => launched,
            Err(LaunchError::Exec { code, message }) => {
                let mut result = ExecResult {
                    exit_code: code,
                    duration_us: elapsed_us(started),
                    ..ExecResult::default()
                };
                if stream {
                    proto::write_frame(
                        writer,
                        &Response::Output {
                            stream: StreamKind::Stderr,
                            data: message.into_bytes(),
                        },
                    )
                    .await?;
                } else {
                    result.stderr = message.into_bytes();
                }
                return proto::write_frame(writer, &Response::Exec(result)).await;
            }
            Err(LaunchError::Invalid(message)) => {
                return proto::write_frame(writer, &error_frame(ErrorKind::InvalidInput, message))
                    .await;
            }
            Err(LaunchError::Io(err)) => {
                return proto::write_frame(
                    writer,
                    &error_frame(ErrorKind::Other, format!("cannot start {}: {err}", argv[0])),
                )
                .await;
            }
        };

        let (Ok(stdout), Ok(stderr)) = (AsyncPipe::new(out_r), AsyncPipe::new(err_r)) else {
            spawn::kill_group(pid, Signal::KILL);
            return proto::write_frame(
                writer,
                &error_frame(ErrorKind::Other, "cannot watch the output pipes"),
            )
            .await;
        };
        let (stdout, stderr) = (Rc::new(stdout), Rc::new(stderr));
        let limit = request.output_limit();
        if let (Some(data), Some(fd)) = (request.stdin, stdin_ours)
            && let Ok(pipe) = AsyncPipe::new(fd)
        {
            // Detached: a process that never reads its stdin must not hold up the result.
            tokio::task::spawn_local(async move {
                let _ = pipe.write_all(&data).await;
            });
        }

        let (mut out_cap, mut err_cap) = if stream {
            (Capture::counting(limit), Capture::counting(limit))
        } else {
            (Capture::keeping(limit), Capture::keeping(limit))
        };
        let deadline = request
            .timeout_ms
            .map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        let mut out_buf = vec![0u8; 64 << 10];
        let mut err_buf = vec![0u8; 64 << 10];
        let (mut out_open, mut err_open) = (true, true);
        let mut exit: Option<Exit> = None;
        let mut timed_out = false;
        let mut client_gone = false;
        let mut drain_until: Option<tokio::time::Instant> = None;

        while exit.is_none() || out_open || err_open {
            tokio::select! {
                read = stdout.read(&mut out_buf), if out_open => match read {
                    Ok(0) | Err(_) => out_open = false,
                    Ok(n) => {
                        let kept = out_cap.accept(&out_buf[..n]);
                        if stream && !kept.is_empty() && !client_gone {
                            let frame = Response::Output { stream: StreamKind::Stdout, data: kept.to_vec() };
                            if proto::write_frame(writer, &frame).await.is_err() {
                                client_gone = true;
                                spawn::kill_group(pid, Signal::KILL);
                            }
                        }
                    }
                },
                read = stderr.read(&mut err_buf), if err_open => match read {
                    Ok(0) | Err(_) => err_open = false,
                    Ok(n) => {
                        let kept = err_cap.accept(&err_buf[..n]);
                        if stream && !kept.is_empty() && !client_gone {
                            let frame = Response::Output { stream: StreamKind::Stderr, data: kept.to_vec() };
                            if proto::write_frame(writer, &frame).await.is_err() {
                                client_gone = true;
                                spawn::kill_group(pid, Signal::KILL);
                            }
                        }
                    }
                },
                status = &mut exit_rx, if exit.is_none() => {
                    exit = Some(status.unwrap_or(Exit { code: None, signal: None }));
                    drain_until = Some(tokio::time::Instant::now() + DRAIN_GRACE);
                },
                () = sleep_until(deadline), if exit.is_none() && !timed_out => {
                    timed_out = true;
                    spawn::kill_group(pid, Signal::KILL);
                },
                () = sleep_until(drain_until) => break,
                _ = proto::read_frame::<_, Request>(reader), if !client_gone => {
                    // The client sends nothing during an exec: any frame or the end of the
                    // stream means it went away. Kill the command rather than orphan it.
                    client_gone = true;
                    spawn::kill_group(pid, Signal::KILL);
                },
            }
        }
        if out_open || err_open {
            // A descendant still holds the pipes: keep draining so it never blocks on a
            // full pipe (or dies of SIGPIPE), and drop what it writes.
            tokio::task::spawn_local(drain(stdout, out_open, stderr, err_open));
        }
        if client_gone {
            return Err(FrameError::Closed);
        }
        let exit = exit.unwrap_or(Exit {
            code: None,
            signal: None,
        });
        let oom_killed =
            !timed_out && exit.signal == Some(libc::SIGKILL) && self.oom_kills() > oom_before;
        let result = ExecResult {
            exit_code: exit.shell_code(),
            signal: exit.signal,
            oom_killed,
            timed_out,
            duration_us: elapsed_us(started),
            stdout: out_cap.kept,
            stderr: err_cap.kept,
            stdout_truncated: out_cap.truncated,
            stderr_truncated: err_cap.truncated,
        };
        proto::write_frame(writer, &Response::Exec(result)).await
    }

    fn spawn(self: &Rc<Self>, spec: ProcessSpec) -> Result<ProcessInfo, RemoteError> {
        let other = |err: io::Error| {
            RemoteError::new(ErrorKind::Other, format!("cannot start process: {err}"))
        };
        {
            let mut processes = self.processes.borrow_mut();
            if processes.len() >= MAX_PROCESSES {
                let oldest_exited = processes
                    .iter()
                    .find(|(_, p)| !p.running())
                    .map(|(id, _)| *id);
                match oldest_exited {
                    Some(id) => {
                        processes.remove(&id);
                    }
                    None => {
                        return Err(RemoteError::new(
                            ErrorKind::InvalidInput,
                            format!(
                                "{MAX_PROCESSES} background processes are running; stop some first"
                            ),
                        ));
                    }
                }
            }
        }
        let argv = spec.command.to_argv();
        let mut env = self.env_for(&spec.env);
        let cwd = spec.cwd.as_deref().unwrap_or(WORKSPACE);
        let (launch_streams, readers, stdin, terminal) = if let Some(size) = spec.pty {
            env.entry("TERM".into())
                .or_insert_with(|| "xterm-256color".into());
            let (master, slave) = open_pty(size).map_err(other)?;
            let master = Rc::new(AsyncPipe::new(master).map_err(other)?);
            let streams = (
                spawn::duplicate(&slave).map_err(other)?,
                spawn::duplicate(&slave).map_err(other)?,
                slave,
            );
            (
                streams,
                vec![(StreamKind::Stdout, master.clone())],
                Some(master.clone()),
                Some(master),
            )
        } else {
            let (in_r, in_w) = spawn::pipe().map_err(other)?;
            let (out_r, out_w) = spawn::pipe().map_err(other)?;
            let (err_r, err_w) = spawn::pipe().map_err(other)?;
            let readers = vec![
                (
                    StreamKind::Stdout,
                    Rc::new(AsyncPipe::new(out_r).map_err(other)?),
                ),
                (
                    StreamKind::Stderr,
                    Rc::new(AsyncPipe::new(err_r).map_err(other)?),
                ),
            ];
            (
                (in_r, out_w, err_w),
                readers,
                Some(Rc::new(AsyncPipe::new(in_w).map_err(other)?)),
                None,
            )
        };
        let (child_in, child_out, child_err) = launch_streams;
        let (pid, exit_rx) = match spawn::launch(
            &self.children,
            Launch {
                argv: &argv,
                env: &env,
                cwd,
                stdin: child_in,
                stdout: child_out,
                stderr: child_err,
                tty: spec.pty.is_some(),
            },
        ) {
            Ok(launched) => launched,
            Err(LaunchError::Exec { message, .. }) => {
                return Err(RemoteError::new(
                    ErrorKind::NotFound,
                    message.trim_end().to_owned(),
                ));
            }
            Err(LaunchError::Invalid(message)) => {
                return Err(RemoteError::new(ErrorKind::InvalidInput, message));
            }
            Err(LaunchError::Io(err)) => return Err(other(err)),
        };
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let process = Rc::new(Process {
            id,
            pid,
            command: spec.command.display(),
            tag: spec.tag,
            pty: spec.pty.is_some(),
            state: Cell::new(ProcessState::Running),
            log: RefCell::new(OutputLog::new(PROCESS_WINDOW)),
            changed: Notify::new(),
            stdin: RefCell::new(stdin),
            terminal,
        });
        self.processes.borrow_mut().insert(id, process.clone());
        let info = process.info();
        tokio::task::spawn_local(supervise(process, readers, exit_rx));
        Ok(info)
    }

    fn process(&self, id: ProcessId) -> Result<Rc<Process>, RemoteError> {
        self.processes.borrow().get(&id).cloned().ok_or_else(|| {
            RemoteError::new(
                ErrorKind::NoSuchProcess,
                format!("no background process with id {id}"),
            )
        })
    }

    fn signal(&self, id: ProcessId, signal: i32) -> Result<(), RemoteError> {
        let process = self.process(id)?;
        let signal = Signal::from_named_raw(signal).ok_or_else(|| {
            RemoteError::new(
                ErrorKind::InvalidInput,
                format!("{signal} is not a signal number"),
            )
        })?;
        if process.running() {
            spawn::kill_group(process.pid, signal);
        }
        Ok(())
    }

    async fn write_stdin(
        &self,
        id: ProcessId,
        data: &[u8],
        close: bool,
    ) -> Result<(), RemoteError> {
        let process = self.process(id)?;
        let pipe = process.stdin.borrow().clone();
        let Some(pipe) = pipe else {
            return Err(RemoteError::new(
                ErrorKind::InvalidInput,
                format!("stdin of process {id} is closed"),
            ));
        };
        if !data.is_empty() {
            pipe.write_all(data).await.map_err(|err| {
                RemoteError::new(ErrorKind::Other, format!("writing to process {id}: {err}"))
            })?;
        }
        if close && !process.pty {
            process.stdin.borrow_mut().take();
        } else if close {
            // A terminal has no end of file: send the line discipline's EOF character.
            pipe.write_all(&[4]).await.map_err(|err| {
                RemoteError::new(ErrorKind::Other, format!("writing to process {id}: {err}"))
            })?;
        }
        Ok(())
    }

    async fn read_output(
        &self,
        id: ProcessId,
        cursor: u64,
        max_bytes: u64,
        wait_ms: u64,
    ) -> Result<ProcessOutput, RemoteError> {
        let process = self.process(id)?;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        loop {
            let notified = process.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let output = process.output(cursor, max_bytes.min(proto::CHUNK as u64 * 4));
            if !output.chunks.is_empty()
                || !process.running()
                || tokio::time::Instant::now() >= deadline
            {
                return Ok(output);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(process.output(cursor, max_bytes));
            }
        }
    }

    async fn attach(
        &self,
        id: ProcessId,
        mut cursor: u64,
        reader: &mut OwnedReadHalf,
        writer: &mut OwnedWriteHalf,
    ) -> Result<(), FrameError> {
        let process = match self.process(id) {
            Ok(process) => process,
            Err(err) => return proto::write_frame(writer, &Response::Error(err)).await,
        };
        loop {
            let notified = process.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let output = process.output(cursor, CHUNK as u64);
            let finished = output.chunks.is_empty() && !process.running();
            if !output.chunks.is_empty() || finished {
                cursor = output.next_cursor;
                proto::write_frame(writer, &Response::ProcessOutput(output)).await?;
                if finished {
                    return Ok(());
                }
                continue;
            }
            tokio::select! {
                () = &mut notified => {}
                _ = proto::read_frame::<_, Request>(reader) => return Err(FrameError::Closed),
            }
        }
    }

    async fn wait(
        &self,
        id: ProcessId,
        timeout_ms: Option<u64>,
    ) -> Result<ProcessInfo, RemoteError> {
        let process = self.process(id)?;
        let deadline = timeout_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        loop {
            let notified = process.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !process.running() {
                return Ok(process.info());
            }
            match deadline {
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return Ok(process.info());
                    }
                }
                None => notified.await,
            }
        }
    }

    fn resize(&self, id: ProcessId, size: PtySize) -> Result<(), RemoteError> {
        let process = self.process(id)?;
        let Some(terminal) = &process.terminal else {
            return Err(RemoteError::new(
                ErrorKind::InvalidInput,
                format!("process {id} has no terminal"),
            ));
        };
        rustix::termios::tcsetwinsize(terminal.fd(), winsize(size)).map_err(|err| {
            RemoteError::new(
                ErrorKind::Other,
                format!("resizing the terminal of process {id}: {err}"),
            )
        })
    }
}

/// Makes a TCP socket on the sandbox's loopback and hands it to the host: the host's egress
/// proxy accepts on the listener, and port forwards use the connection, without the host
/// ever entering the sandbox's namespaces.
async fn socket(port: u16, listen: bool, writer: &mut OwnedWriteHalf) -> Result<(), FrameError> {
    let address = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
    let socket: io::Result<OwnedFd> = if listen {
        std::net::TcpListener::bind(address).map(OwnedFd::from)
    } else {
        match tokio::net::TcpStream::connect(address).await {
            Ok(stream) => stream.into_std().map(OwnedFd::from),
            Err(err) => Err(err),
        }
    };
    let fd = match socket {
        Ok(fd) => fd,
        Err(err) => {
            let verb = if listen { "listen on" } else { "connect to" };
            let kind = if err.kind() == io::ErrorKind::ConnectionRefused {
                ErrorKind::NotFound
            } else {
                ErrorKind::Other
            };
            let message = format!("cannot {verb} {address} in the sandbox: {err}");
            return proto::write_frame(writer, &error_frame(kind, message)).await;
        }
    };
    proto::write_frame(writer, &Response::Socket).await?;
    proto::send_fd(writer.as_ref(), std::os::fd::AsFd::as_fd(&fd)).await?;
    Ok(())
}

/// Hands the host this sandbox's network and user namespaces.
async fn namespaces(writer: &mut OwnedWriteHalf) -> Result<(), FrameError> {
    let open = |ns: &str| std::fs::File::open(format!("/proc/self/ns/{ns}"));
    let (net, user) = match (open("net"), open("user")) {
        (Ok(net), Ok(user)) => (net, user),
        (Err(err), _) | (_, Err(err)) => {
            let message = format!("cannot open the sandbox's namespaces: {err}");
            return proto::write_frame(writer, &error_frame(ErrorKind::Other, message)).await;
        }
    };
    proto::write_frame(writer, &Response::Namespaces).await?;
    proto::send_fd(writer.as_ref(), std::os::fd::AsFd::as_fd(&net)).await?;
    proto::send_fd(writer.as_ref(), std::os::fd::AsFd::as_fd(&user)).await?;
    Ok(())
}

fn reply(result: Result<Response, RemoteError>) -> Response {
    result.unwrap_or_else(Response::Error)
}

fn elapsed_us(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

async fn drain(
    stdout: Rc<AsyncPipe>,
    mut out_open: bool,
    stderr: Rc<AsyncPipe>,
    mut err_open: bool,
) {
    let (mut out_buf, mut err_buf) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    while out_open || err_open {
        tokio::select! {
            read = stdout.read(&mut out_buf), if out_open => out_open = matches!(read, Ok(n) if n > 0),
            read = stderr.read(&mut err_buf), if err_open => err_open = matches!(read, Ok(n) if n > 0),
        }
    }
}

/// Collects a background process's output until it exits, then records how it ended.
async fn supervise(
    process: Rc<Process>,
    readers: Vec<(StreamKind, Rc<AsyncPipe>)>,
    exit_rx: tokio::sync::oneshot::Receiver<Exit>,
) {
    let handles: Vec<JoinHandle<()>> = readers
        .into_iter()
        .map(|(stream, pipe)| {
            let process = process.clone();
            tokio::task::spawn_local(async move {
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    process.log.borrow_mut().push(stream, &buf[..n]);
                    process.changed.notify_waiters();
                }
            })
        })
        .collect();
    let exit = exit_rx.await.unwrap_or(Exit {
        code: None,
        signal: None,
    });
    let readers_done = futures::future::join_all(handles);
    let _ = tokio::time::timeout(DRAIN_GRACE, readers_done).await;
    process.stdin.borrow_mut().take();
    process.state.set(ProcessState::Exited {
        exit_code: exit.shell_code(),
        signal: exit.signal,
    });
    process.changed.notify_waiters();
}

fn winsize(size: PtySize) -> rustix::termios::Winsize {
    rustix::termios::Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Opens a pseudo-terminal pair of the given size: (master, slave).
fn open_pty(size: PtySize) -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::pty::OpenptFlags;
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        PathBuf::from(std::ffi::OsStr::new(
            std::str::from_utf8(name.as_bytes()).map_err(io::Error::other)?,
        ))
        .as_path(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    rustix::termios::tcsetwinsize(&master, winsize(size))?;
    Ok((master, slave))
}

/// Streams a file as `Data` frames, then `Ok`.
async fn read_file(
    path: &str,
    offset: u64,
    limit: Option<u64>,
    writer: &mut OwnedWriteHalf,
) -> Result<(), FrameError> {
    let (mut file, path) = match files::open_read(path, offset) {
        Ok(opened) => opened,
        Err(err) => return proto::write_frame(writer, &Response::Error(err)).await,
    };
    let mut remaining = limit.unwrap_or(u64::MAX);
    while remaining > 0 {
        let want = usize::try_from(remaining.min(CHUNK as u64)).unwrap_or(CHUNK);
        match files::read_chunk(&mut file, &path, want) {
            Ok(data) if data.is_empty() => break,
            Ok(data) => {
                remaining -= data.len() as u64;
                proto::write_frame(writer, &Response::Data { data }).await?;
            }
            Err(err) => return proto::write_frame(writer, &Response::Error(err)).await,
        }
    }
    proto::write_frame(writer, &Response::Ok).await
}

/// Receives `Chunk` frames up to `End` into a file, then answers once.
async fn write_file(
    path: &str,
    mode: Option<u32>,
    append: bool,
    reader: &mut OwnedReadHalf,
    writer: &mut OwnedWriteHalf,
) -> Result<(), FrameError> {
    let mut target = files::open_write(path, mode, append);
    loop {
        match proto::read_frame::<_, Request>(reader).await? {
            Some(Request::Chunk { data }) => {
                if let Ok((file, path)) = &mut target
                    && let Err(err) = files::write_chunk(file, path, &data)
                {
                    target = Err(err);
                }
            }
            Some(Request::End) => break,
            Some(_) => {
                let message = "expected file chunks or the end of the upload";
                proto::write_frame(writer, &error_frame(ErrorKind::Protocol, message)).await?;
                return Err(FrameError::Closed);
            }
            None => return Err(FrameError::Closed),
        }
    }
    let response = match target {
        Ok(_) => Response::Ok,
        Err(err) => Response::Error(err),
    };
    proto::write_frame(writer, &response).await
}
