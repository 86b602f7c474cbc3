//! The helper process: a small, single-threaded copy of the Forge binary (`forge __init`)
//! that forks each sandbox's init into new namespaces.
//!
//! The server is multi-threaded, and a multi-threaded process cannot safely fork a child
//! that goes on to run Rust code. So the host starts this helper once, before any of that
//! matters, and asks it over a socket to create sandboxes. Each child is a copy-on-write
//! fork of the helper (no `exec`), which keeps a cold start to a `clone` and a sandbox's
//! memory to the pages it changes. The helper writes the child's id maps, puts it in its
//! cgroups and hands the host a pidfd and the child's readiness pipe.

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use serde::{Deserialize, Serialize};

use crate::init::{self, Boot, Prepared};
use crate::layout::SkeletonStock;
use crate::plan::SpawnPlan;
use crate::sys;

/// The hidden argument that turns the Forge binary into the helper.
pub const HELPER_ARG: &str = "__init";

/// Largest message on the helper socket (a spawn plan is a few KiB).
const MAX_MESSAGE: usize = 256 << 10;

#[derive(Debug, Serialize, Deserialize)]
enum HelperRequest {
    Spawn(Box<SpawnPlan>),
    /// Finish the background work (the stock of network namespaces), then answer.
    Settle,
}

#[derive(Debug, Serialize, Deserialize)]
enum HelperResponse {
    /// Followed (as ancillary data) by the child's pidfd and the host's end of its first
    /// connection, on which the init reports that it is ready.
    Spawned {
        pid: i32,
        notes: Vec<String>,
    },
    Failed {
        message: String,
    },
    Settled,
}

/// Runs the helper if this process was started as one (`<binary> __init`), and never
/// returns in that case. Call it first thing in `main`, before any thread starts.
pub fn run_if_helper() {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().as_deref() == Some(HELPER_ARG.as_ref()) {
        helper_main(args.next().map(PathBuf::from));
    }
}

/// Serves the host's requests until it closes the socket. `skeletons` is where the stock
/// of sandbox directories is kept (none without it).
fn helper_main(skeletons: Option<PathBuf>) -> ! {
    // The host passes the helper's end of the socket as stdin.
    let socket: OwnedFd = match rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stdin(), 3) {
        Ok(fd) => fd,
        Err(_) => sys::exit_immediately(64),
    };
    if let Ok(null) = rustix::fs::open(
        c"/dev/null",
        rustix::fs::OFlags::RDWR,
        rustix::fs::Mode::empty(),
    ) {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
    }
    warm_up_spawning();
    if sys::auto_reap_children().is_err() {
        sys::exit_immediately(65);
    }
    let Ok(seccomp) = crate::seccomp::compile() else {
        sys::exit_immediately(66)
    };
    let mut stock = Stock {
        networks: NetworkStock::new(),
        skeletons: SkeletonStock::new(skeletons),
    };
    loop {
        stock.fill(Some(&socket));
        let request: HelperRequest = match receive(&socket) {
            Ok(Some((message, _))) => message,
            Ok(None) | Err(_) => sys::exit_immediately(0),
        };
        let plan = match request {
            HelperRequest::Spawn(plan) => plan,
            HelperRequest::Settle => {
                stock.fill(None);
                if send(&socket, &HelperResponse::Settled, &[]).is_err() {
                    sys::exit_immediately(0);
                }
                continue;
            }
        };
        let sent = match spawn_sandbox(*plan, &seccomp, &mut stock) {
            Ok(spawned) => {
                let sent = send(
                    &socket,
                    &HelperResponse::Spawned {
                        pid: spawned.pid,
                        notes: spawned.notes,
                    },
                    &[spawned.pidfd.as_fd(), spawned.control.as_fd()],
                );
                // The last release comes after the answer: the init then runs the rest of
                // its setup, and would otherwise delay the answer by taking this CPU.
                if sent.is_ok() {
                    let _ = rustix::io::write(&spawned.release, &[init::RELEASE_PLACED]);
                }
                sent
            }
            Err(message) => send(&socket, &HelperResponse::Failed { message }, &[]),
        };
        if sent.is_err() {
            sys::exit_immediately(0);
        }
    }
}

/// Runs std's process spawning once (on a program that does not exist, so nothing runs):
/// it resolves `posix_spawn` helpers lazily, and every init forked from this process then
/// starts its first command without paying for that.
fn warm_up_spawning() {
    use std::os::unix::process::CommandExt;
    #[expect(
        clippy::disallowed_methods,
        reason = "spawns nothing: the program does not exist"
    )]
    let mut command = std::process::Command::new("/nonexistent/forge-warm-up");
    let _ = command
        .process_group(0)
        .current_dir("/")
        .env_clear()
        .spawn();
}

/// What the helper makes ahead of time, while it has nothing else to do.
struct Stock {
    networks: NetworkStock,
    skeletons: SkeletonStock,
}

impl Stock {
    /// Makes what is missing, one item at a time. With a `socket`, only while the helper is
    /// idle: each item is made after [`IDLE_BEFORE_STOCKING`] without a request, so that
    /// stocking never competes with a sandbox that is being started (for the CPU, or for
    /// the kernel's mount, network and file system locks), and stops as soon as a request
    /// comes.
    fn fill(&mut self, socket: Option<&OwnedFd>) {
        loop {
            let skeleton = self.skeletons.wanted()
                && (!self.networks.wanted() || self.skeletons.len() <= self.networks.len());
            if !skeleton && !self.networks.wanted() {
                return;
            }
            if socket.is_some_and(|socket| readable(socket, IDLE_BEFORE_STOCKING)) {
                return;
            }
            if skeleton {
                self.skeletons.make();
            } else {
                self.networks.make_one();
            }
        }
    }
}

/// Network namespaces made ahead of time, each with its loopback up.
///
/// A new network namespace is the most expensive part of a sandbox's `clone` (about two
/// thirds of it here). Sandboxes that never administer their network (modes none and
/// allowlist) can be born in one made earlier, while the helper had nothing else to do.
/// Being made by the helper, it belongs to the host's user namespace: the sandbox's root,
/// whose capabilities only count in its own user namespace, cannot reconfigure it, which
/// is stricter than a namespace of its own. Only a root helper can make them.
///
/// For the same reason the sandbox could not mount a `sysfs` (whose network part shows the
/// namespace of whoever mounts it), so each namespace comes with a detached, read-only
/// `sysfs` mount made inside it, which the init attaches at `/sys`.
struct NetworkStock {
    /// The helper's own network namespace, to return to after making one.
    home: Option<OwnedFd>,
    ready: Vec<PreparedNetwork>,
}

struct PreparedNetwork {
    netns: OwnedFd,
    sysfs: OwnedFd,
}

/// Prepared network namespaces kept at once: enough for a short burst of creates, few
/// enough that the kernel memory of idle ones does not matter.
const NETWORK_STOCK: usize = 4;

impl NetworkStock {
    fn new() -> Self {
        let home = rustix::process::geteuid()
            .is_root()
            .then(|| current_network().ok())
            .flatten();
        Self {
            home,
            ready: Vec::new(),
        }
    }

    /// Whether a namespace is missing from the stock.
    fn wanted(&self) -> bool {
        self.home.is_some() && self.ready.len() < NETWORK_STOCK
    }

    fn len(&self) -> usize {
        self.ready.len()
    }

    /// Makes one namespace for the stock.
    fn make_one(&mut self) {
        match self.make() {
            Ok(netns) => self.ready.push(netns),
            // Not possible on this host after all: sandboxes make their own.
            Err(_) => self.home = None,
        }
    }

    /// Makes one namespace: enters a new one, brings its loopback up, mounts its `sysfs`
    /// (detached), keeps descriptors of both, and returns to the helper's own.
    fn make(&self) -> io::Result<PreparedNetwork> {
        use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};
        let Some(home) = &self.home else {
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        };
        sys::unshare_network_namespace()?;
        let made = (|| {
            sys::loopback_up()?;
            let netns = current_network()?;
            let context = rustix::mount::fsopen("sysfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
            rustix::mount::fsconfig_create(&context)?;
            let sysfs = rustix::mount::fsmount(
                &context,
                FsMountFlags::FSMOUNT_CLOEXEC,
                MountAttrFlags::MOUNT_ATTR_RDONLY
                    | MountAttrFlags::MOUNT_ATTR_NOSUID
                    | MountAttrFlags::MOUNT_ATTR_NODEV
                    | MountAttrFlags::MOUNT_ATTR_NOEXEC,
            )?;
            Ok(PreparedNetwork { netns, sysfs })
        })();
        enter_network(home.as_fd());
        made
    }

    /// Forks into new namespaces; when `prepared`, into one of the stock's network
    /// namespaces instead of a new one. Returns the fork's result and, in the child, the
    /// prepared namespace's `sysfs` mount when it got one.
    fn fork(&mut self, prepared: bool) -> io::Result<(Option<i32>, Option<OwnedFd>)> {
        let network = if prepared { self.ready.pop() } else { None };
        let (Some(home), Some(network)) = (&self.home, network) else {
            return Ok((sys::fork_into_namespaces(sys::SANDBOX_NAMESPACES)?, None));
        };
        rustix::thread::move_into_link_name_space(
            network.netns.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )?;
        let forked = sys::fork_into_namespaces(sys::SANDBOX_NAMESPACES & !libc::CLONE_NEWNET);
        if matches!(forked, Ok(None)) {
            // The child stays in the prepared namespace.
            return Ok((None, Some(network.sysfs)));
        }
        enter_network(home.as_fd());
        Ok((forked?, None))
    }
}

/// A descriptor of the network namespace the helper is in.
fn current_network() -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        c"/proc/thread-self/ns/net",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// Returns the helper to its own network namespace. Failing to would put every later
/// sandbox in a namespace that is not its own, so the helper ends instead (the host
/// starts a new one).
fn enter_network(home: rustix::fd::BorrowedFd<'_>) {
    if rustix::thread::move_into_link_name_space(
        home,
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .is_err()
    {
        sys::exit_immediately(67);
    }
}

/// How long the helper must have been idle before it makes a network namespace for stock.
const IDLE_BEFORE_STOCKING: std::time::Duration = std::time::Duration::from_millis(10);

/// Whether a message arrives on `socket` within `wait`.
fn readable(socket: &OwnedFd, wait: std::time::Duration) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        socket,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::event::Timespec::try_from(wait).unwrap_or_default();
    rustix::event::poll(&mut fds, Some(&timeout)).is_ok_and(|n| n > 0)
}

struct Forked {
    pid: i32,
    /// Where [`init::RELEASE_PLACED`] is written once the host has its answer.
    release: OwnedFd,
    pidfd: OwnedFd,
    control: OwnedFd,
    notes: Vec<String>,
}

/// Forks the init of one sandbox and prepares it from the outside, in two steps that run
/// alongside the child's own setup: id maps (and an idmapped workspace) before it may build
/// its root, cgroups while it does.
fn spawn_sandbox(
    plan: SpawnPlan,
    seccomp: &seccompiler::BpfProgram,
    stock: &mut Stock,
) -> Result<Forked, String> {
    fn os(what: &'static str) -> impl Fn(rustix::io::Errno) -> String {
        move |err| format!("{what}: {err}")
    }
    let layers_ready = stock
        .skeletons
        .make_sandbox_dir(&plan.sandbox_dir, plan.owner)
        .map_err(|e| e.to_string())?;
    let (release_r, release_w) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(os("pipe"))?;
    // The init's first connection: it reports ready on it and serves it like any other.
    let (control_host, control_init) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(os("socketpair"))?;
    // Descriptors the helper opens for the child after the fork (workspace mount, OOM counter).
    let (channel_parent, channel_child) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(os("socketpair"))?;
    let (child, sysfs) = stock
        .networks
        .fork(plan.prepared_network)
        .map_err(|e| format!("clone: {e}"))?;
    let Some(pid) = child else {
        // The child: keep only what the init needs, then become it.
        let keep = [
            release_r.as_raw_fd(),
            control_init.as_raw_fd(),
            channel_child.as_raw_fd(),
            sysfs.as_ref().map_or(-1, AsRawFd::as_raw_fd),
        ];
        if sys::close_descriptors_except(&keep).is_err() {
            sys::exit_immediately(1);
        }
        if let Ok(null) = rustix::fs::open(
            c"/dev/null",
            rustix::fs::OFlags::RDWR,
            rustix::fs::Mode::empty(),
        ) {
            let _ = rustix::stdio::dup2_stdin(&null);
            let _ = rustix::stdio::dup2_stdout(&null);
            let _ = rustix::stdio::dup2_stderr(&null);
        }
        init::run(
            Boot {
                plan,
                release: release_r,
                control: control_init,
                channel: channel_child,
                prepared: Prepared {
                    sysfs,
                    layers: layers_ready,
                },
            },
            seccomp,
        );
    };
    drop((release_r, control_init, channel_child));
    let kill = || {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    };
    let (pidfd, notes) = match map_child(pid, &plan, &channel_parent) {
        Ok(mapped) => mapped,
        Err(message) => {
            kill();
            return Err(message);
        }
    };
    rustix::io::write(&release_w, &[init::RELEASE_MAPPED]).map_err(os("release the init"))?;
    if let Err(message) = place_child(pid, &plan, &channel_parent) {
        kill();
        if let Some(cgroup) = &plan.cgroup {
            let _ = cgroup.remove();
        }
        return Err(message);
    }
    Ok(Forked {
        pid,
        pidfd,
        release: release_w,
        control: control_host,
        notes,
    })
}

/// Writes the child's id maps and, for a host workspace, makes and sends its idmapped mount.
fn map_child(
    pid: i32,
    plan: &SpawnPlan,
    channel: &OwnedFd,
) -> Result<(OwnedFd, Vec<String>), String> {
    let raw = rustix::process::Pid::from_raw(pid).ok_or_else(|| format!("invalid pid {pid}"))?;
    let pidfd = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty())
        .map_err(|e| format!("pidfd_open({pid}): {e}"))?;
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let write = |name: &str, value: &str| {
        std::fs::write(proc_dir.join(name), value)
            .map_err(|e| format!("write {value:?} to /proc/{pid}/{name}: {e}"))
    };
    if plan.unprivileged {
        write("setgroups", "deny")?;
    }
    write("uid_map", &plan.uid_map.map_line())?;
    write("gid_map", &plan.gid_map.map_line())?;
    let mut notes = Vec::new();
    if let Some(layers) = &plan.root.idmapped
        && !plan.unprivileged
        && plan.root.lower.iter().any(|l| l.idmap)
    {
        let tree = idmapped_tree(layers, &proc_dir.join("ns/user")).map_err(|e| {
            format!(
                "cannot idmap the image layers in {} (the file system must support idmapped mounts): {e}",
                layers.display()
            )
        })?;
        send_fd(channel, FD_LAYERS, tree.as_fd())
            .map_err(|e| format!("pass the image layers: {e}"))?;
    }
    if let Some(workspace) = &plan.workspace
        && !plan.unprivileged
    {
        match idmapped_tree(workspace, &proc_dir.join("ns/user")) {
            Ok(tree) => send_fd(channel, FD_WORKSPACE, tree.as_fd()).map_err(|e| format!("pass the workspace mount: {e}"))?,
            Err(err) => notes.push(format!(
                "workspace {} could not be idmapped ({err}); it is mounted as is and may be read-only inside",
                workspace.display()
            )),
        }
    }
    Ok((pidfd, notes))
}

/// Creates the child's cgroups, moves it into them and sends it the OOM counter.
fn place_child(pid: i32, plan: &SpawnPlan, channel: &OwnedFd) -> Result<(), String> {
    let Some(cgroup) = &plan.cgroup else {
        return Ok(());
    };
    cgroup
        .create(&plan.limits)
        .map_err(|e| crate::cgroup::error_chain(&e))?;
    for procs in cgroup.procs_files() {
        std::fs::write(&procs, pid.to_string())
            .map_err(|e| format!("join cgroup {}: {e}", procs.display()))?;
    }
    if let Some(events) = cgroup.oom_events_file() {
        let file = rustix::fs::open(
            &events,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| format!("open {}: {e}", events.display()))?;
        send_fd(channel, FD_OOM_EVENTS, file.as_fd())
            .map_err(|e| format!("pass the OOM counter: {e}"))?;
    }
    Ok(())
}

/// A detached copy of `dir` whose ids are shown through the user namespace at `userns`.
fn idmapped_tree(dir: &Path, userns: &Path) -> io::Result<OwnedFd> {
    use rustix::mount::OpenTreeFlags;
    let tree = rustix::mount::open_tree(
        rustix::fs::CWD,
        dir,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE,
    )?;
    let ns = rustix::fs::open(
        userns,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    sys::idmap_mount(tree.as_fd(), ns.as_fd())?;
    Ok(tree)
}

/// Tags of the descriptors the helper sends a child after the fork.
pub(crate) const FD_WORKSPACE: u8 = b'w';
/// The idmapped mount of the image store's layers.
pub(crate) const FD_LAYERS: u8 = b'l';
pub(crate) const FD_OOM_EVENTS: u8 = b'o';

fn send_fd(channel: &OwnedFd, tag: u8, fd: rustix::fd::BorrowedFd<'_>) -> io::Result<()> {
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(
        channel,
        &[IoSlice::new(&[tag])],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Takes the next descriptor waiting on `channel` with its tag; `None` when none is waiting
/// (the helper sends everything before the release the child waits for).
pub(crate) fn receive_fd(channel: &OwnedFd) -> Option<(u8, OwnedFd)> {
    let mut tag = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    rustix::net::recvmsg(
        channel,
        &mut [IoSliceMut::new(&mut tag)],
        &mut control,
        RecvFlags::DONTWAIT,
    )
    .ok()?;
    let fd = control.drain().find_map(|message| match message {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    })?;
    Some((tag[0], fd))
}

/// Sends one message with optional descriptors.
fn send<T: Serialize>(
    socket: &OwnedFd,
    message: &T,
    fds: &[rustix::fd::BorrowedFd<'_>],
) -> io::Result<()> {
    let body = rmp_serde::to_vec_named(message).map_err(io::Error::other)?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() {
        control.push(SendAncillaryMessage::ScmRights(fds));
    }
    rustix::net::sendmsg(
        socket,
        &[IoSlice::new(&body)],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Receives one message and the descriptors that came with it; `None` when the peer closed.
fn receive<T: for<'de> Deserialize<'de>>(
    socket: &OwnedFd,
) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let fds: Vec<OwnedFd> = control
        .drain()
        .flat_map(|message| match message {
            RecvAncillaryMessage::ScmRights(fds) => fds.collect::<Vec<_>>(),
            _ => Vec::new(),
        })
        .collect();
    if received.bytes == 0 {
        return Ok(None);
    }
    let message = rmp_serde::from_slice(&buf[..received.bytes]).map_err(io::Error::other)?;
    Ok(Some((message, fds)))
}

/// How the host starts the helper: a program and its arguments before [`HELPER_ARG`].
#[derive(Debug, Clone)]
pub struct HelperCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl Default for HelperCommand {
    /// The running binary itself, which must call [`run_if_helper`] at the top of `main`.
    fn default() -> Self {
        Self {
            program: PathBuf::from("/proc/self/exe"),
            args: Vec::new(),
        }
    }
}

/// A sandbox init forked by the helper.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub(crate) pid: i32,
    pub(crate) pidfd: OwnedFd,
    /// The host's end of the init's first connection.
    pub(crate) control: OwnedFd,
    pub(crate) notes: Vec<String>,
}

/// The host's end of the helper.
#[derive(Debug)]
pub(crate) struct Helper {
    socket: tokio::io::unix::AsyncFd<OwnedFd>,
    child: std::process::Child,
}

impl Helper {
    /// Starts the helper process. Must be called within a tokio runtime.
    /// The helper keeps its stock of sandbox directories in `skeletons`, which must be on
    /// the file system of the sandboxes' directories.
    pub(crate) fn start(command: &HelperCommand, skeletons: &Path) -> io::Result<Self> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        // The helper's end blocks; only ours is driven by the event loop.
        rustix::io::ioctl_fionbio(&theirs, false)?;
        #[expect(
            clippy::disallowed_methods,
            reason = "starts Forge's own helper binary, not user code"
        )]
        let mut process = std::process::Command::new(&command.program);
        let child = process
            .args(&command.args)
            .arg(HELPER_ARG)
            .arg(skeletons)
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let socket = sys::async_fd(
            ours,
            tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE,
        )?;
        Ok(Self { socket, child })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks the helper for a sandbox init. One request at a time per helper.
    pub(crate) async fn spawn(&self, plan: &SpawnPlan) -> Result<Spawned, HelperError> {
        let (response, fds) = self
            .exchange(&HelperRequest::Spawn(Box::new(plan.clone())))
            .await?;
        match response {
            HelperResponse::Spawned { pid, notes } => {
                let mut fds = fds.into_iter();
                match (fds.next(), fds.next()) {
                    (Some(pidfd), Some(control)) => Ok(Spawned {
                        pid,
                        pidfd,
                        control,
                        notes,
                    }),
                    _ => Err(HelperError::Io(io::Error::other(
                        "the helper sent no descriptors",
                    ))),
                }
            }
            HelperResponse::Failed { message } => Err(HelperError::Failed(message)),
            HelperResponse::Settled => Err(HelperError::Io(io::Error::other(
                "the helper answered another request",
            ))),
        }
    }

    /// Waits until the helper has finished its background work.
    pub(crate) async fn settle(&self) -> Result<(), HelperError> {
        match self.exchange(&HelperRequest::Settle).await?.0 {
            HelperResponse::Settled => Ok(()),
            _ => Err(HelperError::Io(io::Error::other(
                "the helper answered another request",
            ))),
        }
    }

    /// Sends one request and receives its answer.
    async fn exchange(
        &self,
        request: &HelperRequest,
    ) -> Result<(HelperResponse, Vec<OwnedFd>), HelperError> {
        loop {
            let mut guard = self.socket.writable().await.map_err(HelperError::Io)?;
            if let Ok(sent) = guard.try_io(|fd| send(fd.get_ref(), request, &[])) {
                sent.map_err(HelperError::Io)?;
                break;
            }
        }
        let received = loop {
            let mut guard = self.socket.readable().await.map_err(HelperError::Io)?;
            if let Ok(received) = guard.try_io(|fd| receive::<HelperResponse>(fd.get_ref())) {
                break received.map_err(HelperError::Io)?;
            }
        };
        received.ok_or_else(|| HelperError::Io(io::Error::from(io::ErrorKind::UnexpectedEof)))
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Closing the socket ends the helper; reap it so no zombie is left.
        let _ = rustix::net::shutdown(self.socket.get_ref(), rustix::net::Shutdown::Both);
        let _ = self.child.wait();
    }
}

/// Why the helper could not fork an init.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HelperError {
    #[error("talking to the sandbox helper")]
    Io(#[source] io::Error),
    #[error("{0}")]
    Failed(String),
}
