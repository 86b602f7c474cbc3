//! The first moments of a sandbox's init: becoming root of its user namespace, assembling
//! the root file system, pivoting into it and sealing the process with seccomp.
//!
//! Runs in the freshly cloned child, single-threaded, before any async runtime exists.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, Mode};
use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};

use crate::image::{DEV_SYMLINKS, DEVICES};
use crate::init::Prepared;
use crate::plan::SpawnPlan;
use crate::sys;

/// A step of setup that failed, named for the error report.
#[derive(Debug, thiserror::Error)]
#[error("{stage}")]
pub(crate) struct SetupError {
    pub(crate) stage: String,
    #[source]
    pub(crate) source: io::Error,
}

pub(crate) trait Stage<T> {
    fn stage(self, stage: impl FnOnce() -> String) -> Result<T, SetupError>;
}

impl<T, E: Into<io::Error>> Stage<T> for Result<T, E> {
    fn stage(self, stage: impl FnOnce() -> String) -> Result<T, SetupError> {
        self.map_err(|err| SetupError {
            stage: stage(),
            source: err.into(),
        })
    }
}

/// Mount-flag bits that a user namespace may not clear on a bind mount it did not create.
const LOCKED_FLAGS: [(u64, MountFlags); 6] = [
    (libc::ST_NOSUID, MountFlags::NOSUID),
    (libc::ST_NODEV, MountFlags::NODEV),
    (libc::ST_NOEXEC, MountFlags::NOEXEC),
    (libc::ST_NOATIME, MountFlags::NOATIME),
    (libc::ST_NODIRATIME, MountFlags::NODIRATIME),
    (libc::ST_RELATIME, MountFlags::RELATIME),
];

/// Becomes root of the new user namespace and drops the host's supplementary groups.
pub(crate) fn become_root(plan: &SpawnPlan) -> Result<(), SetupError> {
    use rustix::process::{Gid, Uid};
    if !plan.unprivileged {
        rustix::thread::set_thread_groups(&[]).stage(|| "setgroups".into())?;
    }
    rustix::thread::set_thread_res_gid(Gid::ROOT, Gid::ROOT, Gid::ROOT)
        .stage(|| "setresgid 0".into())?;
    rustix::thread::set_thread_res_uid(Uid::ROOT, Uid::ROOT, Uid::ROOT)
        .stage(|| "setresuid 0".into())?;
    Ok(())
}

/// Builds the root file system under `plan.root_dir` and binds the control socket. Returns
/// the listening socket, which keeps working after the pivot.
pub(crate) fn assemble_root(
    plan: &SpawnPlan,
    workspace: Option<OwnedFd>,
    layers: Option<OwnedFd>,
    prepared: Prepared,
) -> Result<UnixListener, SetupError> {
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .stage(|| "make mounts private".into())?;
    if !prepared.layers {
        crate::layout::create_layers(&plan.sandbox_dir)
            .stage(|| "make the overlay's layers".into())?;
    }
    // Whatever the helper's umask was, the sandbox's processes start with the usual one.
    rustix::process::umask(Mode::from_raw_mode(0o022));
    let lowers = attach_layers(plan, layers)?;

    let root = &plan.root_dir;
    let lower = join_layers(&lowers)?;
    let options = format!(
        "lowerdir={lower},upperdir={},workdir={},userxattr,volatile",
        option_path(&plan.root.upper)?,
        option_path(&plan.root.work)?
    );
    mount_fs(
        "overlay",
        root,
        "overlay",
        MountFlags::NOSUID | MountFlags::NODEV,
        &options,
    )
    .stage(|| format!("mount overlay root at {}", root.display()))?;

    for bind in &plan.binds {
        let target = inside(root, &bind.target);
        ensure_dir(&target)?;
        bind_read_only(
            &bind.source,
            &target,
            MountFlags::NOSUID | MountFlags::NODEV,
        )?;
    }

    let workspace_dir = inside(root, "/workspace");
    ensure_dir(&workspace_dir)?;
    if let Some(tree) = workspace {
        rustix::mount::move_mount(
            tree.as_fd(),
            c"",
            CWD,
            &workspace_dir,
            rustix::mount::MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .stage(|| "attach the idmapped workspace".into())?;
    } else if let Some(source) = &plan.workspace {
        rustix::mount::mount_bind_recursive(source, &workspace_dir)
            .stage(|| format!("bind workspace {}", source.display()))?;
    }

    let tmp = inside(root, "/tmp");
    ensure_dir(&tmp)?;
    let tmp_options = format!("mode=1777,size={}", plan.limits.tmp_bytes);
    mount_fs(
        "tmpfs",
        &tmp,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        &tmp_options,
    )
    .stage(|| "mount /tmp".into())?;

    let dev = inside(root, "/dev");
    match &plan.dev_template {
        Some(template) => {
            ensure_dir(&dev)?;
            bind_read_only(template, &dev, MountFlags::NOSUID | MountFlags::NOEXEC)?;
            mount_dev_filesystems(plan, &dev)?;
        }
        None => build_dev(plan, &dev)?,
    }

    let proc_dir = inside(root, "/proc");
    ensure_dir(&proc_dir)?;
    mount_fs(
        "proc",
        &proc_dir,
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        "",
    )
    .stage(|| "mount /proc".into())?;

    let sys_dir = inside(root, "/sys");
    ensure_dir(&sys_dir)?;
    match prepared.sysfs {
        Some(tree) => rustix::mount::move_mount(
            tree.as_fd(),
            c"",
            CWD,
            &sys_dir,
            rustix::mount::MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .stage(|| "attach /sys".into())?,
        None => mount_fs(
            "sysfs",
            &sys_dir,
            "sysfs",
            MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            "",
        )
        .stage(|| "mount /sys".into())?,
    }

    // Bound before the pivot, while the host path still resolves; the listening socket
    // keeps working afterwards and its path is invisible from inside.
    let listener = UnixListener::bind(&plan.socket_path)
        .stage(|| format!("bind control socket {}", plan.socket_path.display()))?;

    rustix::process::chdir(root).stage(|| "chdir to new root".into())?;
    rustix::process::pivot_root(".", ".").stage(|| "pivot_root".into())?;
    rustix::mount::unmount(".", UnmountFlags::DETACH).stage(|| "detach the old root".into())?;
    rustix::process::chdir("/").stage(|| "chdir /".into())?;
    Ok(listener)
}

/// Mounts the idmapped view of the image store's layers the helper sent at `layers` in the
/// sandbox's directory, and returns every lower layer's path, top first (the idmapped ones
/// through that view). The view vanishes with the old root; the overlay keeps its layers.
fn attach_layers(plan: &SpawnPlan, layers: Option<OwnedFd>) -> Result<Vec<PathBuf>, SetupError> {
    let view = plan.sandbox_dir.join("layers");
    let needed = !plan.unprivileged && plan.root.lower.iter().any(|l| l.idmap);
    let root = match (&plan.root.idmapped, needed) {
        (Some(root), true) => {
            let tree = layers.ok_or_else(|| SetupError {
                stage: "receive the idmapped image layers".into(),
                source: io::Error::from(io::ErrorKind::NotFound),
            })?;
            ensure_dir(&view)?;
            rustix::mount::move_mount(
                tree.as_fd(),
                c"",
                CWD,
                &view,
                rustix::mount::MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
            )
            .stage(|| "attach the idmapped image layers".into())?;
            Some(root)
        }
        _ => None,
    };
    plan.root
        .lower
        .iter()
        .map(|lower| match root {
            Some(root) if lower.idmap => lower
                .path
                .strip_prefix(root)
                .map(|rel| view.join(rel))
                .map_err(|_| SetupError {
                    stage: format!(
                        "layer {} is outside {}",
                        lower.path.display(),
                        root.display()
                    ),
                    source: io::Error::from(io::ErrorKind::InvalidInput),
                }),
            _ => Ok(lower.path.clone()),
        })
        .collect()
}

/// Gives the sandbox its hostname and a working loopback interface (unless its network
/// namespace came prepared with one).
pub(crate) fn configure_identity(plan: &SpawnPlan, network_ready: bool) -> Result<(), SetupError> {
    rustix::system::sethostname(plan.hostname.as_bytes()).stage(|| "sethostname".into())?;
    if !network_ready {
        sys::loopback_up().stage(|| "bring up loopback".into())?;
    }
    Ok(())
}

fn build_dev(plan: &SpawnPlan, dev: &Path) -> Result<(), SetupError> {
    ensure_dir(dev)?;
    mount_fs(
        "tmpfs",
        dev,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        "mode=755,size=65536",
    )
    .stage(|| "mount /dev".into())?;
    for (name, _, _) in DEVICES {
        let target = dev.join(name);
        File::create(&target).stage(|| format!("create /dev/{name}"))?;
        rustix::mount::mount_bind(Path::new("/dev").join(name), &target)
            .stage(|| format!("bind /dev/{name}"))?;
    }
    for dir in ["pts", "shm"] {
        ensure_dir(&dev.join(dir))?;
    }
    mount_dev_filesystems(plan, dev)?;
    for (link, target) in DEV_SYMLINKS {
        symlink(target, dev.join(link)).stage(|| format!("symlink /dev/{link}"))?;
    }
    Ok(())
}

/// Mounts the sandbox's own terminal and shared-memory file systems in its `/dev`.
fn mount_dev_filesystems(plan: &SpawnPlan, dev: &Path) -> Result<(), SetupError> {
    let pts = dev.join("pts");
    let pts_options = if plan.unprivileged {
        "newinstance,ptmxmode=0666,mode=0620"
    } else {
        "newinstance,ptmxmode=0666,mode=0620,gid=5"
    };
    mount_fs(
        "devpts",
        &pts,
        "devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        pts_options,
    )
    .stage(|| "mount /dev/pts".into())?;
    let shm = dev.join("shm");
    let shm_options = format!("mode=1777,size={}", plan.limits.tmp_bytes);
    mount_fs(
        "tmpfs",
        &shm,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        &shm_options,
    )
    .stage(|| "mount /dev/shm".into())?;
    Ok(())
}

/// `mount(2)` with a textual data argument.
fn mount_fs(
    source: &str,
    target: &Path,
    fstype: &str,
    flags: MountFlags,
    data: &str,
) -> io::Result<()> {
    let data =
        std::ffi::CString::new(data).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    Ok(rustix::mount::mount(
        source,
        target,
        fstype,
        flags,
        Some(data.as_c_str()),
    )?)
}

/// Bind-mounts `source` at `target` read-only with `extra` flags, keeping the flags the
/// kernel locks for a user namespace (otherwise the remount is refused).
fn bind_read_only(source: &Path, target: &Path, extra: MountFlags) -> Result<(), SetupError> {
    rustix::mount::mount_bind(source, target).stage(|| format!("bind {}", source.display()))?;
    let current = rustix::fs::statvfs(target).stage(|| format!("statvfs {}", target.display()))?;
    let mut flags = MountFlags::RDONLY | extra;
    for (bit, flag) in LOCKED_FLAGS {
        if current.f_flag.bits() & bit != 0 {
            flags |= flag;
        }
    }
    rustix::mount::mount_remount(target, flags | MountFlags::BIND, c"")
        .stage(|| format!("make {} read-only", target.display()))?;
    Ok(())
}

fn ensure_dir(path: &Path) -> Result<(), SetupError> {
    match std::fs::DirBuilder::new().mode(0o755).create(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(SetupError {
            stage: format!("mkdir {}", path.display()),
            source: err,
        }),
    }
}

/// `root` joined with an absolute in-sandbox path.
fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

fn join_layers(layers: &[PathBuf]) -> Result<String, SetupError> {
    let parts: Result<Vec<&str>, SetupError> = layers.iter().map(|p| option_path(p)).collect();
    Ok(parts?.join(":"))
}

/// Overlay options are a comma- and colon-separated string; paths containing those (or
/// non-UTF-8 bytes) are refused rather than escaped.
fn option_path(path: &Path) -> Result<&str, SetupError> {
    path.to_str()
        .filter(|p| !p.contains([',', ':', '\\']))
        .ok_or_else(|| SetupError {
            stage: format!(
                "layer path {} cannot be passed to overlayfs",
                path.display()
            ),
            source: io::Error::from(io::ErrorKind::InvalidInput),
        })
}

/// Marks the init non-dumpable so that its `/proc/1/*` files (memory, descriptors) are
/// closed to the processes it starts.
pub(crate) fn make_undumpable() -> Result<(), SetupError> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .stage(|| "prctl(PR_SET_DUMPABLE)".into())
}
