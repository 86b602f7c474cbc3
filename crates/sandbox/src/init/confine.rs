//! What every process started in a sandbox is confined by, beyond the namespaces it
//! inherits: the seccomp filter and an empty capability bounding set (installed once on the
//! init and inherited), and per process a new session, rlimits, zero capabilities, locked
//! securebits and a Landlock domain that only lets it write to the writable paths.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

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

/// The confinement applied to every child of the init.
#[derive(Debug, Clone)]
pub(crate) struct Confinement {
    landlock: Option<Arc<OwnedFd>>,
    open_files: u64,
    file_size: u64,
}

impl Confinement {
    /// Prepares the Landlock ruleset for the plan's writable paths (after the pivot, so
    /// paths are the sandbox's own).
    pub(crate) fn prepare(plan: &SpawnPlan) -> Result<Self, SetupError> {
        let read = AccessFs::from_read(LANDLOCK_ABI);
        let all = AccessFs::from_all(LANDLOCK_ABI);
        let writable: Vec<&str> = plan
            .writable
            .iter()
            .map(String::as_str)
            .chain(WRITABLE_DEVICES)
            .filter(|p| Path::new(p).exists())
            .collect();
        let ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)
            .and_then(Ruleset::create)
            .and_then(|r| r.add_rules(path_beneath_rules(["/"], read)))
            .and_then(|r| r.add_rules(path_beneath_rules(&writable, all)))
            .map_err(io::Error::other)
            .stage(|| "build the landlock ruleset".into())?;
        let landlock: Option<OwnedFd> = ruleset.into();
        Ok(Self {
            landlock: landlock.map(Arc::new),
            open_files: plan.limits.open_files,
            file_size: plan.limits.file_size_bytes,
        })
    }

    /// Whether Landlock is enforced on this kernel.
    pub(crate) fn landlock_enforced(&self) -> bool {
        self.landlock.is_some()
    }

    /// Seals the init itself: no new privileges, the seccomp filters (inherited by every
    /// child), and an empty bounding set so that no program it starts can regain a
    /// capability. The init keeps its own effective capabilities for the file API.
    pub(crate) fn seal_init(program: &seccompiler::BpfProgram) -> Result<(), SetupError> {
        // seccompiler sets no-new-privileges before it installs the program.
        seccompiler::apply_filter(program)
            .map_err(io::Error::other)
            .stage(|| "install the seccomp filter".into())?;
        let mut cap = 0;
        while sys::drop_bounding_capability(cap)
            .stage(|| format!("drop capability {cap} from the bounding set"))?
        {
            cap += 1;
        }
        Ok(())
    }

    /// The hook run in each child between fork and exec. Only system calls, no allocation.
    pub(crate) fn child_hook(
        &self,
        controlling_tty: bool,
    ) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let landlock = self.landlock.clone();
        let open_files = self.open_files;
        let file_size = self.file_size;
        move || {
            rustix::process::setsid()?;
            if controlling_tty {
                rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
            }
            let limit = |value| Rlimit {
                current: Some(value),
                maximum: Some(value),
            };
            rustix::process::setrlimit(Resource::Core, limit(0))?;
            rustix::process::setrlimit(Resource::Nofile, limit(open_files))?;
            rustix::process::setrlimit(Resource::Fsize, limit(file_size))?;
            rustix::thread::set_capabilities_secure_bits(
                CapabilitiesSecureBits::NO_ROOT
                    | CapabilitiesSecureBits::NO_ROOT_LOCKED
                    | CapabilitiesSecureBits::NO_SETUID_FIXUP
                    | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED
                    | CapabilitiesSecureBits::KEEP_CAPS_LOCKED
                    | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE
                    | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE_LOCKED,
            )?;
            rustix::thread::clear_ambient_capability_set()?;
            rustix::thread::set_capabilities(
                None,
                CapabilitySets {
                    effective: CapabilitySet::empty(),
                    permitted: CapabilitySet::empty(),
                    inheritable: CapabilitySet::empty(),
                },
            )?;
            if let Some(ruleset) = &landlock {
                sys::landlock_restrict_self(ruleset.as_fd())?;
            }
            Ok(())
        }
    }
}
