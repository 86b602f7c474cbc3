//! The layout of a sandbox's host directory, and the helper's stock of ready-made ones.
//!
//! A sandbox's directory holds its overlay's upper and work layers, the mount point of its
//! new root and its control socket. Making the ten directories of a fresh upper layer is
//! cheap on a quiet disk and costly on a busy one (each is a block allocation on the host's
//! file system, behind the journal commits that deleting destroyed sandboxes causes), so
//! the helper makes a few skeletons while it is idle and a new sandbox's directory is one
//! `rename` away. The init makes the layers itself only when the stock is empty.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Mode, RenameFlags};
use rustix::process::{Gid, Uid};

/// The overlay's upper layer, in a sandbox's directory.
pub(crate) const UPPER: &str = "upper";
/// The overlay's work directory, in a sandbox's directory.
pub(crate) const WORK: &str = "work";
/// The mount point of the sandbox's new root, in a sandbox's directory.
pub(crate) const ROOT: &str = "root";
/// The init's control socket, in a sandbox's directory.
pub(crate) const SOCKET: &str = "ctl.sock";

/// The upper layer's directories: those a sandbox may write (owned by its root, with the
/// modes it sees) and the mount points of its memory-backed file systems.
const UPPER_DIRS: [(&str, u32); 7] = [
    ("workspace", 0o755),
    ("root", 0o700),
    ("home", 0o755),
    ("run", 0o755),
    ("var", 0o755),
    ("var/tmp", 0o1777),
    ("tmp", 0o1777),
];

/// Every directory of a fresh layout below the sandbox's directory, parents first, with
/// its mode.
fn entries() -> impl Iterator<Item = (PathBuf, u32)> {
    [(PathBuf::from(UPPER), 0o755)]
        .into_iter()
        .chain(
            UPPER_DIRS
                .iter()
                .map(|(dir, mode)| (Path::new(UPPER).join(dir), *mode)),
        )
        .chain([(PathBuf::from(WORK), 0o700), (PathBuf::from(ROOT), 0o755)])
}

/// Creates the layers' directories in `dir`, with exactly their modes whatever the umask.
pub(crate) fn create_layers(dir: &Path) -> io::Result<()> {
    let umask = rustix::process::umask(Mode::empty());
    let made = entries().try_for_each(|(path, mode)| {
        std::fs::DirBuilder::new()
            .mode(mode)
            .create(dir.join(&path))
            .map_err(|err| io::Error::new(err.kind(), format!("mkdir {}: {err}", path.display())))
    });
    rustix::process::umask(umask);
    made
}

/// Skeletons of sandbox directories (layers made, nothing else) kept ready by the helper.
///
/// They live in a directory of their own on the same file system as the sandboxes', so
/// that taking one is a `rename`: one per helper, named by its pid, since a restarted
/// server's helper may overlap with the old one's. A skeleton belongs to whoever the helper
/// runs as; the sandbox's owner is set when it is taken (a `chown` allocates nothing).
pub(crate) struct SkeletonStock {
    /// `None` once stocking failed: sandboxes then make their own layers.
    dir: Option<PathBuf>,
    ready: Vec<PathBuf>,
    made: u64,
}

/// Skeletons kept at once: as many as prepared network namespaces, for a short burst.
const SKELETON_STOCK: usize = 4;

impl SkeletonStock {
    /// A stock kept below `parent`. What helpers that are gone left there is removed
    /// first: a skeleton cut short by a crash is not worth telling apart from a whole one.
    pub(crate) fn new(parent: Option<PathBuf>) -> Self {
        let dir = parent.and_then(|parent| {
            let _ = std::fs::DirBuilder::new().mode(0o700).create(&parent);
            remove_abandoned(&parent);
            let dir = parent.join(std::process::id().to_string());
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .is_ok()
                .then_some(dir)
        });
        Self {
            dir,
            ready: Vec::new(),
            made: 0,
        }
    }

    /// Whether a skeleton is missing from the stock.
    pub(crate) fn wanted(&self) -> bool {
        self.dir.is_some() && self.ready.len() < SKELETON_STOCK
    }

    pub(crate) fn len(&self) -> usize {
        self.ready.len()
    }

    /// Makes one skeleton; on failure, stops stocking for good.
    pub(crate) fn make(&mut self) {
        let Some(dir) = &self.dir else {
            return;
        };
        self.made += 1;
        let skeleton = dir.join(self.made.to_string());
        let made = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&skeleton)
            .and_then(|()| create_layers(&skeleton));
        if made.is_ok() {
            self.ready.push(skeleton);
        } else {
            let _ = std::fs::remove_dir_all(&skeleton);
            self.dir = None;
        }
    }

    /// Makes a sandbox's directory at `dir`, given to `owner` (the host uid its root maps
    /// to, when not the helper's own): a skeleton from the stock, then `true` (its layers
    /// are made), or an empty directory. A skeleton that fails is dropped and the
    /// directory made empty instead.
    pub(crate) fn make_sandbox_dir(&mut self, dir: &Path, owner: Option<u32>) -> io::Result<bool> {
        if self.take(dir, owner).unwrap_or(false) {
            return Ok(true);
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|err| {
                io::Error::new(err.kind(), format!("create {}: {err}", dir.display()))
            })?;
        if let Some(owner) = owner {
            give(dir, owner)?;
        }
        Ok(false)
    }

    /// Moves a skeleton to `target` (which must not exist) and gives it and its layers to
    /// `owner`. `Ok(false)` when the stock is empty; on an error the skeleton is dropped
    /// and `target` does not exist.
    fn take(&mut self, target: &Path, owner: Option<u32>) -> io::Result<bool> {
        let Some(skeleton) = self.ready.pop() else {
            return Ok(false);
        };
        let moved = rustix::fs::renameat_with(CWD, &skeleton, CWD, target, RenameFlags::NOREPLACE);
        if let Err(err) = moved {
            let _ = std::fs::remove_dir_all(&skeleton);
            if err == rustix::io::Errno::XDEV {
                // The sandboxes' directory is on another file system after all.
                self.dir = None;
            }
            return Err(err.into());
        }
        if let Some(owner) = owner
            && let Err(err) = std::iter::once(PathBuf::new())
                .chain(entries().map(|(path, _)| path))
                .try_for_each(|path| give(&target.join(path), owner))
        {
            let _ = std::fs::remove_dir_all(target);
            return Err(err);
        }
        Ok(true)
    }
}

/// Removes the stocks of helpers that no longer run.
fn remove_abandoned(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let alive = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|pid| {
                rustix::process::test_kill_process(pid) != Err(rustix::io::Errno::SRCH)
            });
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Gives `path` to `owner` (as uid and gid).
fn give(path: &Path, owner: u32) -> io::Result<()> {
    let (uid, gid) = (Some(Uid::from_raw(owner)), Some(Gid::from_raw(owner)));
    rustix::fs::chownat(CWD, path, uid, gid, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|err| io::Error::new(err.kind(), format!("chown {}: {err}", path.display())))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// Every directory below `dir` as (path, mode, uid, gid), sorted.
    fn tree(dir: &Path) -> Vec<(String, u32, u32, u32)> {
        let mut found = Vec::new();
        let mut pending = vec![dir.to_owned()];
        while let Some(next) = pending.pop() {
            let meta = std::fs::symlink_metadata(&next).unwrap();
            let name = next.strip_prefix(dir).unwrap().display().to_string();
            found.push((name, meta.mode() & 0o7777, meta.uid(), meta.gid()));
            pending.extend(std::fs::read_dir(&next).unwrap().map(|e| e.unwrap().path()));
        }
        found.sort();
        found
    }

    #[test]
    fn a_skeleton_from_the_stock_is_the_layout_made_in_place_given_to_its_owner() {
        let temp = tempfile::tempdir().unwrap();
        let mut stock = SkeletonStock::new(Some(temp.path().join("skeletons")));
        stock.make();
        stock.make();
        assert_eq!(stock.len(), 2);
        // Only root may give a directory away.
        let owner = rustix::process::geteuid().is_root().then_some(100_000);
        let taken = temp.path().join("taken");
        assert!(stock.take(&taken, owner).unwrap());
        assert_eq!(stock.len(), 1);

        let in_place = temp.path().join("in-place");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&in_place)
            .unwrap();
        create_layers(&in_place).unwrap();
        let (uid, gid) = match owner {
            Some(owner) => (owner, owner),
            None => (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            ),
        };
        let expected: Vec<(String, u32, u32, u32)> = [
            ("", 0o700),
            ("root", 0o755),
            ("upper", 0o755),
            ("upper/home", 0o755),
            ("upper/root", 0o700),
            ("upper/run", 0o755),
            ("upper/tmp", 0o1777),
            ("upper/var", 0o755),
            ("upper/var/tmp", 0o1777),
            ("upper/workspace", 0o755),
            ("work", 0o700),
        ]
        .into_iter()
        .map(|(path, mode)| (path.to_owned(), mode, uid, gid))
        .collect();
        assert_eq!(tree(&taken), expected);
        // The init makes the same layers as the sandbox's root, so they are its owner's.
        let made_in_place: Vec<_> = tree(&in_place)
            .into_iter()
            .map(|(path, mode, _, _)| (path, mode, uid, gid))
            .collect();
        assert_eq!(made_in_place, expected);
    }

    #[test]
    fn a_taken_skeleton_never_replaces_an_existing_directory() {
        let temp = tempfile::tempdir().unwrap();
        let mut stock = SkeletonStock::new(Some(temp.path().join("skeletons")));
        stock.make();
        let existing = temp.path().join("existing");
        std::fs::create_dir(&existing).unwrap();
        std::fs::write(existing.join("kept"), b"kept").unwrap();
        let err = stock.take(&existing, None).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(existing.join("kept")).unwrap(), b"kept");
        assert_eq!(stock.len(), 0);
        assert!(!stock.take(&temp.path().join("next"), None).unwrap());
    }
}
