//! Images a sandbox's root file system is built from.
//!
//! Only the `host` image exists so far: a small skeleton (the top-level directories and the
//! merged-`/usr` symlinks) as the overlay's lower layer, with the host's own `/usr` and
//! `/etc` (and any `/lib*` or `/bin` that are real directories on this host) mounted on it
//! read-only. It needs no download, so a fresh offline machine can start sandboxes at once.
//! Unpacked OCI images will plug in as further lower layers.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use fs_err as fs;
use forge_types::sandbox::HOST_IMAGE;

use crate::plan::ReadOnlyBind;

/// Bumped when the skeleton's contents change, so old skeletons are rebuilt.
const SKELETON_VERSION: &str = "forge-host-skeleton-2";

/// Top-level directories of every sandbox root, with their modes. All are searchable by
/// everyone: the overlay looks names up in the lower layer with the sandbox root's
/// credentials, which the host's root owns; the upper layer carries the modes a sandbox
/// sees for the directories it may write (`/root` is 0700 there).
const SKELETON_DIRS: [(&str, u32); 15] = [
    ("usr", 0o755),
    ("etc", 0o755),
    ("proc", 0o555),
    ("sys", 0o555),
    ("dev", 0o755),
    ("tmp", 0o1777),
    ("workspace", 0o755),
    ("root", 0o755),
    ("home", 0o755),
    ("var", 0o755),
    ("var/tmp", 0o1777),
    ("run", 0o755),
    ("mnt", 0o755),
    ("opt", 0o755),
    ("srv", 0o755),
];

/// Host directories that are either symlinks into `/usr` (merged-`/usr` systems) or real
/// directories to mount.
const SYSTEM_DIRS: [&str; 6] = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// The layers and mounts of one image's root file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RootFs {
    /// Overlay lower layers, top first.
    pub(crate) lower: Vec<PathBuf>,
    pub(crate) binds: Vec<ReadOnlyBind>,
}

/// The images this host can start.
#[derive(Debug, Clone)]
pub(crate) struct Images {
    host: RootFs,
}

impl Images {
    /// Prepares the `host` image under `dir` (creating its skeleton once).
    pub(crate) fn prepare(dir: &Path) -> io::Result<Self> {
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
        Ok(Self { host: RootFs { lower: vec![skeleton], binds: host_binds(Path::new("/")) } })
    }

    /// The root file system of `name`, or `None` for an image that is not installed.
    pub(crate) fn resolve(&self, name: &str) -> Option<RootFs> {
        (name == HOST_IMAGE).then(|| self.host.clone())
    }

    /// Names of the installed images, for error messages.
    pub(crate) fn names(&self) -> Vec<String> {
        vec![HOST_IMAGE.to_owned()]
    }
}

/// Creates the skeleton, mirroring `host_root`'s merged-`/usr` symlinks.
fn build_skeleton(skeleton: &Path, host_root: &Path) -> io::Result<()> {
    fs::create_dir_all(skeleton)?;
    fs::set_permissions(skeleton, std::fs::Permissions::from_mode(0o755))?;
    for (dir, mode) in SKELETON_DIRS {
        let path = skeleton.join(dir);
        std::fs::DirBuilder::new().mode(mode).create(&path).or_else(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) }
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
        .map(|dir| ReadOnlyBind { source: host_root.join(dir), target: format!("/{dir}") })
        .collect();
    for name in SYSTEM_DIRS {
        let host = host_root.join(name);
        let is_link = std::fs::symlink_metadata(&host).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link && host.is_dir() {
            binds.push(ReadOnlyBind { source: host, target: format!("/{name}") });
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
        assert_eq!(std::fs::read_link(skeleton.join("bin")).unwrap(), PathBuf::from("usr/bin"));
        assert!(skeleton.join("lib64").is_dir());
        assert!(!skeleton.join("sbin").exists());
        let targets: Vec<String> = host_binds(host.path()).into_iter().map(|b| b.target).collect();
        assert_eq!(targets, ["/usr", "/etc", "/lib64"]);
        let mode = std::fs::metadata(skeleton.join("tmp")).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o1777);
    }
}
