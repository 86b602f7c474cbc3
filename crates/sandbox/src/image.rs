//! Turning an image into a sandbox's root file system: which layers the overlay stacks and
//! what is mounted on it.
//!
//! The `host` base is a small skeleton (the top-level directories and the merged-`/usr`
//! symlinks) as the bottom layer, with the host's own `/usr` and `/etc` (and any `/lib*` or
//! `/bin` that are real directories on this host) mounted on it read-only. It needs no
//! download, so a fresh offline machine can start sandboxes at once. Every other image's
//! layers come from the image store ([`forge_image::ImageStore`]); an image made from a
//! host-based sandbox (a snapshot) stacks its layers on the host base.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;
use std::sync::Arc;

use forge_image::{Base, Image, ImageStore};
use forge_types::sandbox::HOST_IMAGE;
use fs_err as fs;

use crate::plan::{Lower, ReadOnlyBind};

/// Bumped when the skeleton's contents change, so old skeletons are rebuilt.
const SKELETON_VERSION: &str = "forge-host-skeleton-3";

/// Top-level directories every sandbox root has that it never writes to, with their modes.
/// The writable ones (`/workspace`, `/root`, `/tmp`, …) come from each sandbox's own upper
/// layer, owned by its root.
const SKELETON_DIRS: [(&str, u32); 8] = [
    ("usr", 0o755),
    ("etc", 0o755),
    ("proc", 0o555),
    ("sys", 0o555),
    ("dev", 0o755),
    ("mnt", 0o755),
    ("opt", 0o755),
    ("srv", 0o755),
];

/// Device nodes of a sandbox's `/dev`: name, major, minor.
pub(crate) const DEVICES: [(&str, u32, u32); 6] = [
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];

/// Symlinks of a sandbox's `/dev`.
pub(crate) const DEV_SYMLINKS: [(&str, &str); 5] = [
    ("ptmx", "pts/ptmx"),
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Prepares a `/dev` for sandboxes to mount read-only: the six device nodes, mount points
/// for `pts` and `shm`, and the usual symlinks. One bind mount replaces a tmpfs and six
/// device binds per sandbox. Needs root (for `mknod`) and a data directory whose file
/// system allows device nodes; `None` otherwise, and sandboxes assemble `/dev` themselves.
pub(crate) fn prepare_dev(dir: &Path) -> Option<PathBuf> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let allows_devices = rustix::fs::statvfs(dir)
        .is_ok_and(|s| !s.f_flag.contains(rustix::fs::StatVfsMountFlags::NODEV));
    if !allows_devices {
        return None;
    }
    let dev = dir.join("dev");
    if dev.join("tty").exists() {
        return Some(dev);
    }
    let staging = dir.join(format!("dev.{}", std::process::id()));
    let build = || -> io::Result<()> {
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging)?;
        fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o755))?;
        for (name, major, minor) in DEVICES {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                staging.join(name),
                rustix::fs::FileType::CharacterDevice,
                rustix::fs::Mode::from_raw_mode(0o666),
                rustix::fs::makedev(major, minor),
            )?;
            fs::set_permissions(staging.join(name), std::fs::Permissions::from_mode(0o666))?;
        }
        fs::create_dir(staging.join("pts"))?;
        fs::create_dir(staging.join("shm"))?;
        for (link, target) in DEV_SYMLINKS {
            symlink(target, staging.join(link))?;
        }
        fs::rename(&staging, &dev)
    };
    match build() {
        Ok(()) => Some(dev),
        Err(err) => {
            tracing::debug!(error = %err, "cannot prepare a /dev template; sandboxes build their own");
            let _ = fs::remove_dir_all(&staging);
            None
        }
    }
}

/// Host directories that are either symlinks into `/usr` (merged-`/usr` systems) or real
/// directories to mount.
const SYSTEM_DIRS: [&str; 6] = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// The layers and mounts of one image's root file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RootFs {
    /// Overlay lower layers, top first.
    pub(crate) lower: Vec<Lower>,
    /// Where the idmapped layers lie (the image store's layer directory).
    pub(crate) idmapped: Option<PathBuf>,
    pub(crate) binds: Vec<ReadOnlyBind>,
    /// The image is the whole root (not the host's directories), so all of it is writable.
    pub(crate) writable_root: bool,
    /// The image's environment.
    pub(crate) env: BTreeMap<String, String>,
}

/// The images this host can start: the host base and the image store.
#[derive(Debug, Clone)]
pub(crate) struct Images {
    skeleton: PathBuf,
    host_binds: Vec<ReadOnlyBind>,
    store: Arc<ImageStore>,
}

impl Images {
    /// Prepares the `host` base under `dir` (creating its skeleton once) beside `store`.
    pub(crate) fn prepare(dir: &Path, store: Arc<ImageStore>) -> io::Result<Self> {
        let host_dir = dir.join(HOST_IMAGE);
        fs::create_dir_all(&host_dir)?;
        fs::set_permissions(&host_dir, std::fs::Permissions::from_mode(0o711))?;
        let skeleton = host_dir.join("rootfs");
        let marker = host_dir.join("version");
        let current = fs::read_to_string(&marker).unwrap_or_default();
        if current.trim() != SKELETON_VERSION || !skeleton.is_dir() {
            let staging = host_dir.join(format!("rootfs.{}", std::process::id()));
            let _ = fs::remove_dir_all(&staging);
            build_skeleton(&staging, Path::new("/"))?;
            let _ = fs::remove_dir_all(&skeleton);
            fs::rename(&staging, &skeleton)?;
            fs::write(&marker, SKELETON_VERSION)?;
        }
        Ok(Self {
            skeleton,
            host_binds: host_binds(Path::new("/")),
            store,
        })
    }

    pub(crate) fn store(&self) -> &Arc<ImageStore> {
        &self.store
    }

    /// The root file system of `image`.
    pub(crate) fn root_fs(&self, image: &Image) -> RootFs {
        let idmap = self.store.preserves_owners();
        let mut lower: Vec<Lower> = image
            .layers
            .iter()
            .rev()
            .map(|id| Lower {
                path: self.store.layer_dir(id),
                idmap,
            })
            .collect();
        let host = image.base == Base::Host;
        if host {
            lower.push(Lower {
                path: self.skeleton.clone(),
                idmap: false,
            });
        }
        RootFs {
            lower,
            idmapped: idmap.then(|| self.store.layers_dir()),
            binds: if host {
                self.host_binds.clone()
            } else {
                Vec::new()
            },
            writable_root: !host,
            env: image.config.env_pairs(),
        }
    }
}

/// Creates the skeleton, mirroring `host_root`'s merged-`/usr` symlinks.
fn build_skeleton(skeleton: &Path, host_root: &Path) -> io::Result<()> {
    fs::create_dir_all(skeleton)?;
    fs::set_permissions(skeleton, std::fs::Permissions::from_mode(0o755))?;
    for (dir, mode) in SKELETON_DIRS {
        let path = skeleton.join(dir);
        std::fs::DirBuilder::new()
            .mode(mode)
            .create(&path)
            .or_else(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
        fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
    }
    for name in SYSTEM_DIRS {
        let host = host_root.join(name);
        match std::fs::read_link(&host) {
            Ok(target) => symlink(target, skeleton.join(name))?,
            Err(_) if host.is_dir() => fs::create_dir(skeleton.join(name))?,
            Err(_) => {}
        }
    }
    Ok(())
}

/// What of the host is mounted read-only into a `host` sandbox.
fn host_binds(host_root: &Path) -> Vec<ReadOnlyBind> {
    let mut binds: Vec<ReadOnlyBind> = ["usr", "etc"]
        .into_iter()
        .map(|dir| ReadOnlyBind {
            source: host_root.join(dir),
            target: format!("/{dir}"),
        })
        .collect();
    for name in SYSTEM_DIRS {
        let host = host_root.join(name);
        let is_link = std::fs::symlink_metadata(&host).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link && host.is_dir() {
            binds.push(ReadOnlyBind {
                source: host,
                target: format!("/{name}"),
            });
        }
    }
    binds
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_skeleton_mirrors_merged_usr_links_and_mounts_real_dirs() {
        let host = tempfile::tempdir().unwrap();
        for dir in ["usr/bin", "usr/lib", "etc", "lib64"] {
            std::fs::create_dir_all(host.path().join(dir)).unwrap();
        }
        symlink("usr/bin", host.path().join("bin")).unwrap();
        symlink("usr/lib", host.path().join("lib")).unwrap();
        let skeleton = host.path().join("skeleton");
        build_skeleton(&skeleton, host.path()).unwrap();
        assert_eq!(
            std::fs::read_link(skeleton.join("bin")).unwrap(),
            PathBuf::from("usr/bin")
        );
        assert!(skeleton.join("lib64").is_dir());
        assert!(!skeleton.join("sbin").exists());
        let targets: Vec<String> = host_binds(host.path())
            .into_iter()
            .map(|b| b.target)
            .collect();
        assert_eq!(targets, ["/usr", "/etc", "/lib64"]);
        let mode = std::fs::metadata(skeleton.join("proc"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(mode, 0o555);
    }
}
