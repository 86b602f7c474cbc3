//! Turning a directory in overlayfs's format (a sandbox's writable layer) into a layer of the
//! store: snapshots, forks and template layers.
//!
//! The copy keeps what overlayfs needs to read the directory back as a lower layer: files,
//! directories, links, FIFOs, whiteouts (character devices 0:0) and the opaque-directory
//! attribute. Other overlayfs attributes (origin, impurity) describe the old mount and are
//! dropped. Owners are shifted from the sandbox's host range back to the ids the sandbox
//! saw, so a layer reads the same under any sandbox's idmapping.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use forge_types::ImageSource;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timestamps};

use crate::ImageError;
use crate::store::{Base, Image, ImageStore, LayerMeta, Ownership, hex};
use crate::unpack::OPAQUE_XATTR;

/// Ids a sandbox's files may have in the copied directory: `count` ids starting at `base` on
/// the host are ids 0… inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdShift {
    pub base: u32,
    pub count: u32,
}

/// Ids outside the sandbox's range (files it could not have made) become this.
const OVERFLOW_ID: u32 = 65_534;

/// What to make of a committed directory.
#[derive(Debug, Clone)]
pub struct Commit<'a> {
    /// The image the directory was written on top of.
    pub parent: &'a Image,
    /// Name for the new image; a hidden image (a fork's) when `None`.
    pub name: Option<&'a str>,
    pub source: ImageSource,
    /// How the directory's owners map to the sandbox's ids (`None` when the store runs
    /// unprivileged and every file belongs to the current user).
    pub shift: Option<IdShift>,
}

impl ImageStore {
    /// Copies `upper` into a new layer and records an image of `commit.parent`'s layers with
    /// it on top. The sandbox may keep running: each file is copied as it is when read.
    pub fn commit(&self, upper: &Path, commit: &Commit<'_>) -> Result<Image, ImageError> {
        let mut nonce = [0u8; 32];
        rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())
            .map_err(|e| ImageError::io("draw a layer id for", upper)(e.into()))?;
        let layer_id = hex(&nonce);
        let work = self.temp_dir()?;
        let root = work.path().join("root");
        std::fs::create_dir(&root).map_err(ImageError::io("create", &root))?;
        let mut copier = Copier {
            shift: commit.shift,
            ownership: self.ownership,
            size_bytes: 0,
            entries: 0,
        };
        let open = |path: &Path| {
            rustix::fs::open(
                path,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                Mode::empty(),
            )
            .map_err(|e| ImageError::io("open", path)(e.into()))
        };
        let from = open(upper)?;
        let to = open(&root)?;
        copier
            .copy_dir(from.as_fd(), to.as_fd(), Path::new("/"))
            .map_err(|(path, source)| ImageError::Layer {
                layer: layer_id.clone(),
                reason: format!("cannot copy {}", path.display()),
                source: Some(source),
            })?;
        copier
            .finish(from.as_fd(), to.as_fd())
            .map_err(ImageError::io("copy the attributes of", upper))?;
        self.install_layer(
            &work,
            &LayerMeta {
                id: layer_id.clone(),
                diff_id: None,
                size_bytes: copier.size_bytes,
                entries: copier.entries,
                created_at: jiff::Timestamp::now(),
            },
        )?;

        let parent = commit.parent;
        let mut layers = parent.layers.clone();
        layers.push(layer_id.clone());
        let id = crate::oci::sha256(format!("{}\n{layer_id}", parent.id).as_bytes());
        let reference = match commit.name {
            Some(name) => crate::reference::normalize(name)?,
            None => format!("forge.local/fork/{}:latest", &layer_id[..16]),
        };
        let image = Image {
            reference,
            id,
            digest: None,
            base: if parent.base == Base::Host {
                Base::Host
            } else {
                Base::Scratch
            },
            layers,
            config: parent.config.clone(),
            size_bytes: parent.size_bytes + copier.size_bytes,
            created_at: jiff::Timestamp::now(),
            source: commit.source.clone(),
            parent: Some(parent.reference.clone()),
            hidden: commit.name.is_none(),
        };
        self.insert(image.clone())?;
        Ok(image)
    }
}

struct Copier {
    shift: Option<IdShift>,
    ownership: Ownership,
    size_bytes: u64,
    entries: u64,
}

type CopyError = (std::path::PathBuf, io::Error);

impl Copier {
    fn copy_dir(
        &mut self,
        from: BorrowedFd<'_>,
        to: BorrowedFd<'_>,
        at: &Path,
    ) -> Result<(), CopyError> {
        let fail = |path: &Path| {
            let path = path.to_path_buf();
            move |e: io::Error| (path, e)
        };
        let dir = rustix::fs::openat(
            from,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fail(at)(e.into()))?;
        let mut names = Vec::new();
        let iter = rustix::fs::Dir::read_from(&dir).map_err(|e| fail(at)(e.into()))?;
        for entry in iter {
            let entry = entry.map_err(|e| fail(at)(e.into()))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(name.to_vec());
            }
        }
        for name in names {
            let name = OsStr::from_bytes(&name);
            let path = at.join(name);
            match self.copy_entry(from, to, name, &path) {
                Ok(()) => {}
                // The sandbox may delete files while it is copied: a vanished entry is
                // simply not in the snapshot.
                Err((_, e)) if e.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    fn copy_entry(
        &mut self,
        from: BorrowedFd<'_>,
        to: BorrowedFd<'_>,
        name: &OsStr,
        path: &Path,
    ) -> Result<(), CopyError> {
        let fail = |e: rustix::io::Errno| (path.to_path_buf(), io::Error::from(e));
        let stat = rustix::fs::statat(from, name, AtFlags::SYMLINK_NOFOLLOW).map_err(fail)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        let mode = Mode::from_raw_mode(stat.st_mode & 0o7777);
        self.entries += 1;
        match kind {
            FileType::Directory => {
                rustix::fs::mkdirat(to, name, Mode::from_raw_mode(0o700)).map_err(fail)?;
                let src = open_dir(from, name).map_err(fail)?;
                let dst = open_dir(to, name).map_err(fail)?;
                self.copy_dir(src.as_fd(), dst.as_fd(), path)?;
                self.finish(src.as_fd(), dst.as_fd())
                    .map_err(|e| (path.to_path_buf(), e))?;
                Ok(())
            }
            FileType::RegularFile => {
                let src = rustix::fs::openat(
                    from,
                    name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(fail)?;
                let dst = rustix::fs::openat(
                    to,
                    name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(fail)?;
                let copied = io::copy(
                    &mut File::from(src),
                    &mut File::from(dst.try_clone().map_err(|e| (path.to_path_buf(), e))?),
                )
                .map_err(|e| (path.to_path_buf(), e))?;
                self.size_bytes += copied;
                self.own(dst.as_fd(), &stat)
                    .map_err(|e| (path.to_path_buf(), e))?;
                rustix::fs::fchmod(&dst, mode).map_err(fail)?;
                rustix::fs::futimens(&dst, &times(&stat)).map_err(fail)?;
                Ok(())
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(from, name, Vec::new()).map_err(fail)?;
                rustix::fs::symlinkat(target.as_c_str(), to, name).map_err(fail)?;
                self.own_at(to, name, &stat)
                    .map_err(|e| (path.to_path_buf(), e))?;
                Ok(())
            }
            FileType::CharacterDevice if stat.st_rdev == 0 => {
                // A whiteout: a deletion of something in a lower layer.
                rustix::fs::mknodat(to, name, FileType::CharacterDevice, Mode::empty(), 0)
                    .map_err(fail)?;
                Ok(())
            }
            FileType::Fifo => {
                rustix::fs::mknodat(to, name, FileType::Fifo, mode, 0).map_err(fail)?;
                self.own_at(to, name, &stat)
                    .map_err(|e| (path.to_path_buf(), e))?;
                Ok(())
            }
            // Sockets and device nodes do not survive a snapshot.
            _ => {
                self.entries -= 1;
                Ok(())
            }
        }
    }

    /// Copies a directory's owner, mode, time and opaqueness once its contents are in.
    fn finish(&self, from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> io::Result<()> {
        let stat = rustix::fs::fstat(from)?;
        let mut value = [0u8; 8];
        if let Ok(n) = rustix::fs::fgetxattr(from, OPAQUE_XATTR, &mut value) {
            rustix::fs::fsetxattr(
                to,
                OPAQUE_XATTR,
                &value[..n],
                rustix::fs::XattrFlags::empty(),
            )?;
        }
        self.own(to, &stat)?;
        rustix::fs::fchmod(to, Mode::from_raw_mode(stat.st_mode & 0o7777))?;
        rustix::fs::futimens(to, &times(&stat))?;
        Ok(())
    }

    fn ids(&self, stat: &rustix::fs::Stat) -> Option<(u32, u32)> {
        if self.ownership == Ownership::Current {
            return None;
        }
        let shift = |id: u32| match self.shift {
            Some(s) if id >= s.base && id - s.base < s.count => id - s.base,
            Some(_) => OVERFLOW_ID,
            None => id,
        };
        Some((shift(stat.st_uid), shift(stat.st_gid)))
    }

    fn own(&self, fd: BorrowedFd<'_>, stat: &rustix::fs::Stat) -> io::Result<()> {
        if let Some((uid, gid)) = self.ids(stat) {
            rustix::fs::fchown(
                fd,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            )?;
        }
        Ok(())
    }

    fn own_at(&self, dir: BorrowedFd<'_>, name: &OsStr, stat: &rustix::fs::Stat) -> io::Result<()> {
        if let Some((uid, gid)) = self.ids(stat) {
            rustix::fs::chownat(
                dir,
                name,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )?;
        }
        rustix::fs::utimensat(dir, name, &times(stat), AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(())
    }
}

fn open_dir(dir: BorrowedFd<'_>, name: &OsStr) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn times(stat: &rustix::fs::Stat) -> Timestamps {
    Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: stat.st_atime,
            tv_nsec: stat.st_atime_nsec.cast_signed(),
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: stat.st_mtime,
            tv_nsec: stat.st_mtime_nsec.cast_signed(),
        },
    }
}
