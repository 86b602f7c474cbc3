//! What every process in a sandbox is confined by beyond its namespaces. It is all applied
//! once, to the init, and inherited by every process the init starts.

use std::io;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    path_beneath_rules,
};
use rustix::process::{Resource, Rlimit};
use rustix::thread::{CapabilitiesSecureBits, CapabilitySet, CapabilitySets};

use crate::init::setup::{SetupError, Stage};
use crate::plan::SpawnPlan;
use crate::sys;

/// The Landlock ABI Forge asks for; older kernels get the best they support.
const LANDLOCK_ABI: ABI = ABI::V6;

/// Device files processes may write to (and use ioctls on) besides the writable paths.
const WRITABLE_DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
];

/// Confines the init itself, and through inheritance every process it starts: rlimits,
/// securebits that keep root from regaining capabilities at `exec`, an empty bounding set,
/// a Landlock domain that allows writes only to the writable paths, and the seccomp filter.
///
/// The init keeps its own effective capabilities (its file API manages files owned by any
/// sandbox user), but Landlock binds it too: the file API can write exactly where the
/// sandbox's processes can. Because everything is inherited, children need no per-process
/// setup between fork and exec, so they can be started with `posix_spawn`.
///
/// This applies everything but the seccomp filter, which comes last (after the init has
/// entered its cgroup namespace, which the filter forbids); see [`install_seccomp`].
/// Returns whether Landlock is enforced on this kernel.
pub(crate) fn restrict(plan: &SpawnPlan) -> Result<bool, SetupError> {
    let limit = |value| Rlimit {
        current: Some(value),
        maximum: Some(value),
    };
    rustix::process::setrlimit(Resource::Core, limit(0))
        .stage(|| "setrlimit(RLIMIT_CORE)".into())?;
    rustix::process::setrlimit(Resource::Nofile, limit(plan.limits.open_files))
        .stage(|| "setrlimit(RLIMIT_NOFILE)".into())?;
    rustix::process::setrlimit(Resource::Fsize, limit(plan.limits.file_size_bytes))
        .stage(|| "setrlimit(RLIMIT_FSIZE)".into())?;
    rustix::thread::set_capabilities_secure_bits(
        CapabilitiesSecureBits::NO_ROOT
            | CapabilitiesSecureBits::NO_ROOT_LOCKED
            | CapabilitiesSecureBits::NO_SETUID_FIXUP
            | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED
            | CapabilitiesSecureBits::KEEP_CAPS_LOCKED
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE_LOCKED,
    )
    .stage(|| "lock the securebits".into())?;
    rustix::thread::clear_ambient_capability_set()
        .stage(|| "clear the ambient capabilities".into())?;
    let own = rustix::thread::capabilities(None).stage(|| "capget".into())?;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            inheritable: CapabilitySet::empty(),
            ..own
        },
    )
    .stage(|| "clear the inheritable capabilities".into())?;
    let mut cap = 0;
    while sys::drop_bounding_capability(cap)
        .stage(|| format!("drop capability {cap} from the bounding set"))?
    {
        cap += 1;
    }
    rustix::thread::set_no_new_privs(true).stage(|| "prctl(PR_SET_NO_NEW_PRIVS)".into())?;
    restrict_writes(plan)
}

/// Installs the seccomp filter on the init; every process it starts inherits it.
pub(crate) fn install_seccomp(program: &seccompiler::BpfProgram) -> Result<(), SetupError> {
    seccompiler::apply_filter(program)
        .map_err(io::Error::other)
        .stage(|| "install the seccomp filter".into())
}

/// The paths this sandbox's processes may write below, fixed once its root is built.
static WRITABLE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// The paths processes may write below, for messages.
pub(crate) fn writable_paths() -> &'static [String] {
    WRITABLE.get().map_or(&[], Vec::as_slice)
}

/// The plan's writable paths, or the whole root when it is the sandbox's own (an image's
/// layers under a private upper layer, where `mkdir /app` must work as it does in any
/// container). The kernel's file systems stay guarded without Landlock: `/sys` is mounted
/// read-only, `/dev` is a read-only template, and what `/proc` lets the unprivileged,
/// capability-less root of a user namespace write is its own processes' settings.
fn collect_writable(plan: &SpawnPlan) -> Vec<String> {
    if plan.writable_root {
        return vec!["/".to_owned()];
    }
    plan.writable.clone()
}

/// Restricts writes to the plan's writable paths (and a few devices). Runs after the pivot,
/// so the paths are the sandbox's own.
fn restrict_writes(plan: &SpawnPlan) -> Result<bool, SetupError> {
    let read = AccessFs::from_read(LANDLOCK_ABI);
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let paths = WRITABLE.get_or_init(|| collect_writable(plan));
    let writable: Vec<&str> = paths
        .iter()
        .map(String::as_str)
        .chain(WRITABLE_DEVICES)
        .filter(|p| Path::new(p).exists())
        .collect();
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .and_then(Ruleset::create)
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], read)))
        .and_then(|r| r.add_rules(path_beneath_rules(&writable, all)))
        .and_then(landlock::RulesetCreated::restrict_self)
        .map_err(io::Error::other)
        .stage(|| "enforce the landlock ruleset".into())?;
    Ok(status.ruleset != landlock::RulesetStatus::NotEnforced)
}

/// The hook a terminal's process runs between fork and exec: a new session with the
/// terminal as its controlling tty. Only system calls.
pub(crate) fn terminal_hook() -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
    || {
        rustix::process::setsid()?;
        rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
        Ok(())
    }
}
