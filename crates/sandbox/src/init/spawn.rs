//! Starting confined processes from the init, and learning how they ended.
//!
//! The init is PID 1 of its namespace, so every orphan in the sandbox becomes its child.
//! One reaper task collects every exit with `waitpid(-1)` and hands statuses to whoever
//! registered for that pid; the rest are orphans, reaped and forgotten.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::rc::Rc;

use rustix::fs::OFlags;
use rustix::process::{Pid, WaitOptions};
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

use crate::sys;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exit {
    pub(crate) code: Option<i32>,
    pub(crate) signal: Option<i32>,
}

impl Exit {
    /// The status as a shell reports it: the exit code, or 128 plus the signal.
    pub(crate) fn shell_code(self) -> i32 {
        match (self.code, self.signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => -1,
        }
    }
}

/// Pids the init waits for.
#[derive(Debug, Default)]
pub(crate) struct Children {
    waiters: RefCell<HashMap<i32, oneshot::Sender<Exit>>>,
}

impl Children {
    pub(crate) fn watch(&self, pid: i32) -> oneshot::Receiver<Exit> {
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().insert(pid, tx);
        rx
    }

    fn reap_ready(&self) {
        loop {
            // `wait` is `waitpid(-1)`; `waitpid(None)` would only see this process group.
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    let exit = Exit {
                        code: status.exit_status(),
                        signal: status.terminating_signal(),
                    };
                    if let Some(tx) = self
                        .waiters
                        .borrow_mut()
                        .remove(&pid.as_raw_nonzero().get())
                    {
                        let _ = tx.send(exit);
                    }
                }
                Ok(None) | Err(_) => return,
            }
        }
    }

    /// Reaps children for the rest of the init's life.
    pub(crate) async fn reap_forever(self: Rc<Self>) {
        let Ok(mut sigchld) = signal(SignalKind::child()) else {
            return;
        };
        loop {
            self.reap_ready();
            if sigchld.recv().await.is_none() {
                return;
            }
        }
    }
}

/// Sends `signal` to a whole process group.
pub(crate) fn kill_group(pgid: i32, signal: rustix::process::Signal) {
    if let Some(pid) = Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// A pipe or terminal end driven by the event loop.
#[derive(Debug)]
pub(crate) struct AsyncPipe(AsyncFd<OwnedFd>);

impl AsyncPipe {
    pub(crate) fn new(fd: OwnedFd) -> io::Result<Self> {
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags | OFlags::NONBLOCK)?;
        Ok(Self(sys::async_fd(
            fd,
            tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE,
        )?))
    }

    /// Reads some bytes; `Ok(0)` at end of stream (a terminal whose other side closed
    /// reports `EIO`, which means the same).
    pub(crate) async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.0.readable().await?;
            match guard
                .try_io(|fd| rustix::io::read(fd.get_ref(), &mut *buf).map_err(io::Error::from))
            {
                Ok(Ok(n)) => return Ok(n),
                Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => {}
            }
        }
    }

    pub(crate) async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.0.writable().await?;
            match guard.try_io(|fd| rustix::io::write(fd.get_ref(), data).map_err(io::Error::from))
            {
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    pub(crate) fn fd(&self) -> &OwnedFd {
        self.0.get_ref()
    }
}

/// A pipe whose read end the init keeps.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// Why a process could not be started.
#[derive(Debug)]
pub(crate) enum LaunchError {
    /// Shell-style: exit code and message for stderr.
    Exec {
        code: i32,
        message: String,
    },
    Invalid(String),
    Io(io::Error),
}

/// What to start and with which standard streams.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub(crate) argv: &'a [String],
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) cwd: &'a str,
    pub(crate) stdin: OwnedFd,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    /// The process gets `stdin` as its controlling terminal.
    pub(crate) tty: bool,
}

/// Starts a process in its own process group (a terminal's in its own session). It inherits
/// the init's confinement. Returns its pid (which is also its process group) and a receiver
/// for its exit.
pub(crate) fn launch(
    children: &Children,
    launch: Launch<'_>,
) -> Result<(i32, oneshot::Receiver<Exit>), LaunchError> {
    let Some(program) = launch.argv.first() else {
        return Err(LaunchError::Invalid("the command is empty".into()));
    };
    if program.is_empty() {
        return Err(LaunchError::Invalid("the program name is empty".into()));
    }
    match std::fs::metadata(launch.cwd) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(LaunchError::Invalid(format!(
                "working directory {} is not a directory",
                launch.cwd
            )));
        }
        Err(_) => {
            return Err(LaunchError::Invalid(format!(
                "working directory {} does not exist",
                launch.cwd
            )));
        }
    }
    // A file that is executable but not a binary nor a `#!` script is run by `/bin/sh`, as
    // `execvp` and every shell do: `sh -c /workspace/run` ran such scripts before it was
    // split without a shell, and must still.
    let spare = [&launch.stdin, &launch.stdout, &launch.stderr].map(OwnedFd::try_clone);
    let tty = launch.tty;
    match spawn(
        launch.argv,
        launch.env,
        launch.cwd,
        [launch.stdin, launch.stdout, launch.stderr],
        tty,
    ) {
        Ok(pid) => Ok((pid, children.watch(pid))),
        Err(err) if err.raw_os_error() == Some(libc::ENOEXEC) => {
            let [Ok(stdin), Ok(stdout), Ok(stderr)] = spare else {
                return Err(exec_failure(program, err));
            };
            let argv: Vec<String> = std::iter::once("/bin/sh".to_owned())
                .chain(launch.argv.iter().cloned())
                .collect();
            let pid = spawn(&argv, launch.env, launch.cwd, [stdin, stdout, stderr], tty)
                .map_err(|_| exec_failure(program, err))?;
            Ok((pid, children.watch(pid)))
        }
        Err(err) => Err(exec_failure(program, err)),
    }
}

/// Starts `argv` in its own process group with the given standard streams.
fn spawn(
    argv: &[String],
    env: &BTreeMap<String, String>,
    cwd: &str,
    [stdin, stdout, stderr]: [OwnedFd; 3],
    tty: bool,
) -> io::Result<i32> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the init is the one place that starts sandboxed processes"
    )]
    let mut command = std::process::Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env_clear()
        .envs(env)
        .env("PWD", cwd)
        .current_dir(cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    if tty {
        sys::before_exec(&mut command, crate::init::confine::terminal_hook());
    } else {
        // Without a hook, std starts the process with posix_spawn (no copy of the init).
        command.process_group(0);
    }
    let child = command.spawn()?;
    let pid = i32::try_from(child.id()).map_err(|_| io::Error::other("pid out of range"))?;
    // The child is reaped by `Children`, never through `Child::wait`.
    drop(child);
    Ok(pid)
}

/// Turns a failed exec into what a shell would print.
fn exec_failure(program: &str, err: io::Error) -> LaunchError {
    let lookup = !program.contains('/');
    match err.raw_os_error() {
        Some(libc::ENOENT) if lookup => LaunchError::Exec {
            code: 127,
            message: format!("{program}: command not found\n"),
        },
        Some(libc::ENOENT) => LaunchError::Exec {
            code: 127,
            message: format!("{program}: No such file or directory\n"),
        },
        Some(libc::EACCES) => LaunchError::Exec {
            code: 126,
            message: format!("{program}: Permission denied\n"),
        },
        Some(libc::ENOEXEC) => LaunchError::Exec {
            code: 126,
            message: format!("{program}: cannot execute: Exec format error\n"),
        },
        Some(libc::ENOTDIR) => LaunchError::Exec {
            code: 126,
            message: format!("{program}: Not a directory\n"),
        },
        _ => LaunchError::Io(err),
    }
}

/// `/dev/null` opened for a child's stdin.
pub(crate) fn dev_null() -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        c"/dev/null",
        OFlags::RDWR | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// Duplicates a descriptor (a terminal's slave end serves all three streams).
pub(crate) fn duplicate(fd: &OwnedFd) -> io::Result<OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd.as_fd(), 0)?)
}
