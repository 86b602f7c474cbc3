//! The sandbox's init: PID 1 of its namespaces, the same binary as the host side.
//!
//! The helper process forks it into fresh namespaces ([`crate::helper`]); it then waits for
//! the helper to write its id maps and cgroup membership, assembles the root file system,
//! seals itself with seccomp and serves the control socket (`agent`). It reports the
//! outcome of setup on a pipe the host reads: `ok`, or `error: ` and what failed.

mod agent;
mod confine;
mod files;
mod output;
mod setup;
mod spawn;

use std::io::Read;
use std::os::fd::OwnedFd;

use crate::init::setup::{SetupError, Stage};
use crate::plan::SpawnPlan;
use crate::proto::{self, ErrorKind, PROTOCOL_VERSION, RemoteError, Response};
use crate::sys;

/// The helper writes this once the child's id maps are in place: it may build its root.
pub(crate) const RELEASE_MAPPED: u8 = b'1';
/// The helper writes this once the child is in its cgroups: it may seal itself and serve.
pub(crate) const RELEASE_PLACED: u8 = b'2';

/// What the forked child receives from the helper.
#[derive(Debug)]
pub(crate) struct Boot {
    pub(crate) plan: SpawnPlan,
    /// The helper writes [`RELEASE_MAPPED`] then [`RELEASE_PLACED`] on it, or closes it to
    /// give up on the sandbox.
    pub(crate) release: OwnedFd,
    /// The init's first connection: setup reports `Ready` or its error on it, then it is
    /// served like any accepted connection.
    pub(crate) control: OwnedFd,
    /// Descriptors the helper opens for the init after the fork (tagged, see `helper`).
    pub(crate) channel: OwnedFd,
    pub(crate) prepared: Prepared,
}

/// What the helper made ahead of time for this sandbox.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Present when the init was born in one of the helper's prepared network namespaces
    /// (whose loopback is already up, and which it could not configure anyway): that
    /// namespace's `sysfs`, mounted by the helper, since the init may not mount one there.
    pub(crate) sysfs: Option<OwnedFd>,
    /// The sandbox's directory came from the helper's stock with the overlay's layers and
    /// the root's mount point already made.
    pub(crate) layers: bool,
}

/// Runs the init. Never returns: the init lives until the sandbox is destroyed.
pub(crate) fn run(boot: Boot, seccomp: &seccompiler::BpfProgram) -> ! {
    let Boot {
        plan,
        release,
        control,
        channel,
        prepared,
    } = boot;
    let mut release = std::fs::File::from(release);
    let mut control = std::os::unix::net::UnixStream::from(control);
    match setup(&plan, &mut release, &channel, prepared, seccomp) {
        Ok((listener, agent, notes)) => {
            let ready = Response::Ready {
                version: PROTOCOL_VERSION,
                notes,
            };
            if proto::write_frame_blocking(&mut control, &ready).is_err() {
                sys::exit_immediately(1);
            }
            drop((release, channel));
            agent::serve(listener, control, agent)
        }
        Err(err) => {
            let message = format!("{}: {}", err.stage, err.source);
            let _ = proto::write_frame_blocking(
                &mut control,
                &Response::Error(RemoteError::new(ErrorKind::Other, message)),
            );
            sys::exit_immediately(1)
        }
    }
}

/// Descriptors the helper sent after the fork, by tag. Each release guarantees that what
/// the helper sent before it has arrived, not that nothing more has: the OOM counter, sent
/// while the init builds its root, may already wait when the init drains the channel after
/// the first release, so every drain keeps every tag.
#[derive(Default)]
struct Received {
    workspace: Option<OwnedFd>,
    layers: Option<OwnedFd>,
    oom_events: Option<OwnedFd>,
}

impl Received {
    fn drain(&mut self, channel: &OwnedFd) {
        while let Some((tag, fd)) = crate::helper::receive_fd(channel) {
            let slot = match tag {
                crate::helper::FD_WORKSPACE => &mut self.workspace,
                crate::helper::FD_LAYERS => &mut self.layers,
                crate::helper::FD_OOM_EVENTS => &mut self.oom_events,
                _ => continue,
            };
            *slot = Some(fd);
        }
    }
}

/// Waits for the helper's next release byte; exits quietly if it gave up.
fn wait_for(release: &mut std::fs::File, expected: u8) {
    let mut byte = [0u8; 1];
    if !matches!(release.read(&mut byte), Ok(1)) || byte[0] != expected {
        sys::exit_immediately(1);
    }
}

fn setup(
    plan: &SpawnPlan,
    release: &mut std::fs::File,
    channel: &OwnedFd,
    prepared: Prepared,
    seccomp: &seccompiler::BpfProgram,
) -> Result<(std::os::unix::net::UnixListener, agent::Agent, Vec<String>), SetupError> {
    sys::default_sigchld().stage(|| "restore SIGCHLD".into())?;
    wait_for(release, RELEASE_MAPPED);
    let mut received = Received::default();
    received.drain(channel);
    setup::become_root(plan)?;
    let network_ready = prepared.sysfs.is_some();
    let listener = setup::assemble_root(
        plan,
        received.workspace.take(),
        received.layers.take(),
        prepared,
    )?;
    setup::configure_identity(plan, network_ready)?;
    setup::make_undumpable()?;
    let landlock = confine::restrict(plan)?;
    // Meanwhile the helper has been building the cgroups; they must hold the init before
    // it serves anything.
    wait_for(release, RELEASE_PLACED);
    received.drain(channel);
    let oom_events = received.oom_events;
    if plan.cgroup.is_some() {
        sys::unshare_cgroup_namespace().stage(|| "unshare the cgroup namespace".into())?;
    }
    confine::install_seccomp(seccomp)?;
    let mut notes = Vec::new();
    if !landlock {
        notes.push(
            "landlock is not available on this kernel; writes are confined by permissions only"
                .to_owned(),
        );
    }
    Ok((
        listener,
        agent::Agent::new(plan.env.clone(), oom_events),
        notes,
    ))
}
