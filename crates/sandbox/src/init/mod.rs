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

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::OwnedFd;

use crate::init::setup::{SetupError, Stage};
use crate::plan::SpawnPlan;
use crate::proto::{self, ErrorKind, PROTOCOL_VERSION, RemoteError, Response};
use crate::sys;

/// What the forked child receives from the helper.
#[derive(Debug)]
pub(crate) struct Boot {
    pub(crate) plan: SpawnPlan,
    /// Closed (or written to) by the helper once the child may proceed.
    pub(crate) release: OwnedFd,
    /// The init's first connection: setup reports `Ready` or its error on it, then it is
    /// served like any accepted connection.
    pub(crate) control: OwnedFd,
    /// Where the helper sends the idmapped workspace mount, when it makes one.
    pub(crate) workspace_channel: Option<OwnedFd>,
}

/// Runs the init. Never returns: the init lives until the sandbox is destroyed.
pub(crate) fn run(boot: Boot, seccomp: &seccompiler::BpfProgram) -> ! {
    let Boot {
        plan,
        release,
        control,
        workspace_channel,
    } = boot;
    let mut release = std::fs::File::from(release);
    let mut go = [0u8; 1];
    if !matches!(release.read(&mut go), Ok(1)) || go[0] != b'1' {
        // The helper gave up on this sandbox before releasing it.
        sys::exit_immediately(1);
    }
    drop(release);
    // Sent before the release, so it is waiting now if it was sent at all.
    let workspace = workspace_channel.and_then(|channel| crate::helper::receive_fd(&channel));
    let mut control = std::os::unix::net::UnixStream::from(control);
    match setup(&plan, workspace, seccomp) {
        Ok((listener, agent, notes)) => {
            let ready = Response::Ready {
                version: PROTOCOL_VERSION,
                notes,
            };
            if proto::write_frame_blocking(&mut control, &ready).is_err() {
                sys::exit_immediately(1);
            }
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

fn setup(
    plan: &SpawnPlan,
    workspace: Option<OwnedFd>,
    seccomp: &seccompiler::BpfProgram,
) -> Result<(std::os::unix::net::UnixListener, agent::Agent, Vec<String>), SetupError> {
    sys::default_sigchld().stage(|| "restore SIGCHLD".into())?;
    let oom_events = plan
        .oom_events
        .as_deref()
        .map(setup::open_keep)
        .transpose()?;
    setup::become_root(plan)?;
    if !plan.cgroup_procs.is_empty() {
        sys::unshare_cgroup_namespace().stage(|| "unshare the cgroup namespace".into())?;
    }
    let listener = setup::assemble_root(plan, workspace)?;
    setup::configure_identity(plan)?;
    let confinement = confine::Confinement::prepare(plan)?;
    let mut notes = Vec::new();
    if !confinement.landlock_enforced() {
        notes.push(
            "landlock is not available on this kernel; writes are confined by permissions only"
                .to_owned(),
        );
    }
    setup::seal_init()?;
    confine::Confinement::seal_init(seccomp)?;
    let env: BTreeMap<String, String> = plan.env.clone();
    Ok((
        listener,
        agent::Agent::new(confinement, env, oom_events),
        notes,
    ))
}
