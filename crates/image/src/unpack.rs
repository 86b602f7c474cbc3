//! Unpacks an OCI layer (a tar stream, gzip- or zstd-compressed or not) into a directory in
//! overlayfs's own format, so the directory can be a lower layer as it is.
//!
//! Whiteouts follow the OCI layer spec: `.wh.NAME` becomes a character device 0:0 named
//! `NAME` (overlayfs's whiteout) and `.wh..wh..opq` marks its directory opaque with the
//! `user.overlay.opaque` attribute (sandboxes mount overlays with `userxattr`).
//!
//! The archive is untrusted. Every entry is created with `*at` calls relative to a parent
//! opened with `openat2(RESOLVE_IN_ROOT)`, so `..`, absolute paths and symbolic links (even
//! ones the archive itself planted) resolve inside the layer and never outside it. Device
//! nodes are skipped (sandboxes mount their root `nodev` anyway) and extended attributes are
//! not unpacked, so an archive cannot forge overlayfs metadata.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Timestamps};
use sha2::{Digest as _, Sha256};

use crate::store::{Ownership, hex};

/// Overlayfs's attribute marking a directory opaque, in the `user.` namespace that a mount
/// with `userxattr` reads.
pub(crate) const OPAQUE_XATTR: &str = "user.overlay.opaque";
const WHITEOUT_PREFIX: &[u8] = b".wh.";
const OPAQUE_MARKER: &[u8] = b".wh..wh..opq";

/// What unpacking produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unpacked {
    /// `sha256:` digest of the uncompressed tar stream (the layer's "diff id").
    pub(crate) diff_id: String,
    /// Bytes of regular-file content.
    pub(crate) size_bytes: u64,
    pub(crate) entries: u64,
    /// Device nodes left out.
    pub(crate) skipped_devices: u64,
}

/// Why an entry could not be unpacked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnpackError {
    #[error("the stream is not a readable archive")]
    Read(#[source] io::Error),
    #[error("entry {path:?}: {reason}")]
    Entry { path: String, reason: String },
    #[error("entry {path:?}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// Wraps a reader and hashes everything read through it.
pub(crate) struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Reads what is left, then returns the `sha256:` digest and length of everything read.
    pub(crate) fn finish(mut self) -> io::Result<(String, u64)> {
        io::copy(&mut self, &mut io::sink())?;
        Ok((
            format!("sha256:{}", hex(&self.hasher.finalize())),
            self.count,
        ))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// A reader that decompresses `raw` if it starts with a gzip or zstd magic number.
pub(crate) fn decompress<'a>(raw: impl Read + 'a) -> io::Result<Box<dyn Read + 'a>> {
    let mut buffered = BufReader::with_capacity(256 << 10, raw);
    let head = buffered.fill_buf()?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(buffered)))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let decoder = ruzstd::decoding::StreamingDecoder::new(buffered)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        Ok(Box::new(decoder))
    } else {
        Ok(Box::new(buffered))
    }
}

/// Unpacks the (possibly compressed) layer `raw` into the empty directory `dest`.
pub(crate) fn unpack(
    raw: impl Read,
    dest: &Path,
    ownership: Ownership,
) -> Result<Unpacked, UnpackError> {
    let stream = HashingReader::new(decompress(raw).map_err(UnpackError::Read)?);
    let root = rustix::fs::open(
        dest,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| UnpackError::Read(e.into()))?;
    let mut unpacker = Unpacker {
        root,
        ownership,
        dirs: Vec::new(),
        stats: Unpacked {
            diff_id: String::new(),
            size_bytes: 0,
            entries: 0,
            skipped_devices: 0,
        },
    };
    let mut archive = tar::Archive::new(stream);
    for entry in archive.entries().map_err(UnpackError::Read)? {
        let mut entry = entry.map_err(UnpackError::Read)?;
        unpacker.entry(&mut entry)?;
    }
    unpacker.finish_dirs()?;
    let (diff_id, _) = archive.into_inner().finish().map_err(UnpackError::Read)?;
    unpacker.stats.diff_id = diff_id;
    Ok(unpacker.stats)
}

/// A directory whose final owner, mode and time are applied after its contents exist (a
/// read-only directory could not be filled otherwise).
struct PendingDir {
    parts: Vec<Vec<u8>>,
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: i64,
}

struct Unpacker {
    root: OwnedFd,
    ownership: Ownership,
    dirs: Vec<PendingDir>,
    stats: Unpacked,
}

impl Unpacker {
    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), UnpackError> {
        let raw_path = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw_path).into_owned();
        let parts = clean(&raw_path).map_err(|reason| UnpackError::Entry {
            path: shown.clone(),
            reason,
        })?;
        let header = entry.header();
        let kind = header.entry_type();
        let meta = EntryMeta {
            mode: header.mode().unwrap_or(0o644) & 0o7777,
            uid: header.uid().map_or(0, |v| u32::try_from(v).unwrap_or(0)),
            gid: header.gid().map_or(0, |v| u32::try_from(v).unwrap_or(0)),
            mtime: header.mtime().map_or(0, |v| i64::try_from(v).unwrap_or(0)),
        };
        let io_err = |source: io::Error| UnpackError::Io {
            path: shown.clone(),
            source,
        };
        let Some((name, parent)) = parts.split_last() else {
            // The archive's root ("./"): it describes the layer's top directory.
            if kind.is_dir() {
                self.dirs.push(PendingDir {
                    parts: Vec::new(),
                    mode: meta.mode,
                    uid: meta.uid,
                    gid: meta.gid,
                    mtime: meta.mtime,
                });
            }
            return Ok(());
        };
        self.stats.entries += 1;

        if name.as_slice() == OPAQUE_MARKER {
            let dir = self.open_dir(parent, true).map_err(io_err)?;
            rustix::fs::fsetxattr(&dir, OPAQUE_XATTR, b"y", rustix::fs::XattrFlags::empty())
                .map_err(|e| io_err(e.into()))?;
            return Ok(());
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
            if hidden.is_empty() || hidden == b"." || hidden == b".." || hidden.contains(&b'/') {
                return Err(UnpackError::Entry {
                    path: shown,
                    reason: "malformed whiteout".into(),
                });
            }
            let dir = self.open_dir(parent, true).map_err(io_err)?;
            remove_existing(&dir, hidden).map_err(io_err)?;
            let mut hidden_parts = parent.to_vec();
            hidden_parts.push(hidden.to_vec());
            self.dirs.retain(|d| !d.parts.starts_with(&hidden_parts));
            rustix::fs::mknodat(
                &dir,
                OsStr::from_bytes(hidden),
                FileType::CharacterDevice,
                Mode::empty(),
                rustix::fs::makedev(0, 0),
            )
            .map_err(|e| io_err(e.into()))?;
            return Ok(());
        }

        let dir = self.open_dir(parent, true).map_err(io_err)?;
        let name_os = OsStr::from_bytes(name);
        if kind != tar::EntryType::Directory {
            // Whatever directory stood here (and everything below it) is gone.
            self.dirs.retain(|d| !d.parts.starts_with(&parts));
        }
        match kind {
            tar::EntryType::Directory => {
                let existing = rustix::fs::statat(&dir, name_os, AtFlags::SYMLINK_NOFOLLOW);
                let is_dir = existing
                    .as_ref()
                    .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory);
                if !is_dir {
                    if existing.is_ok() {
                        remove_existing(&dir, name).map_err(io_err)?;
                    }
                    rustix::fs::mkdirat(&dir, name_os, Mode::from_raw_mode(0o700))
                        .map_err(|e| io_err(e.into()))?;
                }
                self.dirs.retain(|d| d.parts != parts);
                self.dirs.push(PendingDir {
                    parts: parts.clone(),
                    mode: meta.mode,
                    uid: meta.uid,
                    gid: meta.gid,
                    mtime: meta.mtime,
                });
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                remove_existing(&dir, name).map_err(io_err)?;
                let fd = rustix::fs::openat(
                    &dir,
                    name_os,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map_err(|e| io_err(e.into()))?;
                let mut file = File::from(fd);
                let written = io::copy(entry, &mut file).map_err(io_err)?;
                self.stats.size_bytes += written;
                self.finish_fd(file.as_fd(), &meta).map_err(io_err)?;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| UnpackError::Entry {
                        path: shown.clone(),
                        reason: "symbolic link without a target".into(),
                    })?
                    .into_owned();
                remove_existing(&dir, name).map_err(io_err)?;
                rustix::fs::symlinkat(OsStr::from_bytes(&target), &dir, name_os)
                    .map_err(|e| io_err(e.into()))?;
                self.finish_at(&dir, name_os, &meta, false)
                    .map_err(io_err)?;
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| UnpackError::Entry {
                        path: shown.clone(),
                        reason: "hard link without a target".into(),
                    })?
                    .into_owned();
                let target_parts = clean(&target).map_err(|reason| UnpackError::Entry {
                    path: shown.clone(),
                    reason: format!("hard link target: {reason}"),
                })?;
                let Some((target_name, target_parent)) = target_parts.split_last() else {
                    return Err(UnpackError::Entry {
                        path: shown,
                        reason: "hard link to the layer's root".into(),
                    });
                };
                let source_dir =
                    self.open_dir(target_parent, false)
                        .map_err(|e| UnpackError::Entry {
                            path: shown.clone(),
                            reason: format!(
                                "hard link target {} is not in this layer ({e})",
                                String::from_utf8_lossy(&target)
                            ),
                        })?;
                if target_parts == parts {
                    return Ok(());
                }
                remove_existing(&dir, name).map_err(io_err)?;
                rustix::fs::linkat(
                    &source_dir,
                    OsStr::from_bytes(target_name),
                    &dir,
                    name_os,
                    AtFlags::empty(),
                )
                .map_err(|e| UnpackError::Entry {
                    path: shown.clone(),
                    reason: format!("hard link to {}: {e}", String::from_utf8_lossy(&target)),
                })?;
            }
            tar::EntryType::Fifo => {
                remove_existing(&dir, name).map_err(io_err)?;
                rustix::fs::mknodat(&dir, name_os, FileType::Fifo, Mode::from_raw_mode(0o600), 0)
                    .map_err(|e| io_err(e.into()))?;
                self.finish_at(&dir, name_os, &meta, true).map_err(io_err)?;
            }
            tar::EntryType::Char | tar::EntryType::Block => {
                self.stats.skipped_devices += 1;
            }
            // Metadata entries (PAX, GNU long names) are consumed by the tar reader; anything
            // else (sparse files, volume labels) has no place in an image layer.
            other if other.is_pax_global_extensions() || other.is_pax_local_extensions() => {}
            other => {
                return Err(UnpackError::Entry {
                    path: shown,
                    reason: format!("unsupported entry type {other:?}"),
                });
            }
        }
        Ok(())
    }

    /// Opens the directory `parts` below the layer root, resolving every component (links
    /// included) inside the layer; with `create`, missing directories are made.
    fn open_dir(&self, parts: &[Vec<u8>], create: bool) -> io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let resolve = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
        let open = |parts: &[Vec<u8>]| {
            rustix::fs::openat2(&self.root, join(parts), flags, Mode::empty(), resolve)
        };
        match open(parts) {
            Ok(fd) => return Ok(fd),
            Err(rustix::io::Errno::NOENT) if create => {}
            Err(err) => return Err(err.into()),
        }
        // Walks down, creating what is missing where each prefix really resolves; a link
        // that leads nowhere stays an error rather than being guessed at.
        let mut current = open(&[])?;
        for depth in 1..=parts.len() {
            current = match open(&parts[..depth]) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::NOENT) => {
                    let name = OsStr::from_bytes(&parts[depth - 1]);
                    match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(err) => return Err(err.into()),
                    }
                    open(&parts[..depth])?
                }
                Err(err) => return Err(err.into()),
            };
        }
        Ok(current)
    }

    fn finish_fd(&self, fd: std::os::fd::BorrowedFd<'_>, meta: &EntryMeta) -> io::Result<()> {
        if self.ownership == Ownership::Preserve {
            rustix::fs::fchown(
                fd,
                Some(rustix::fs::Uid::from_raw(meta.uid)),
                Some(rustix::fs::Gid::from_raw(meta.gid)),
            )?;
        }
        // After the chown, which clears set-id bits.
        rustix::fs::fchmod(fd, Mode::from_raw_mode(meta.mode))?;
        rustix::fs::futimens(fd, &timestamps(meta.mtime))?;
        Ok(())
    }

    fn finish_at(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        meta: &EntryMeta,
        chmod: bool,
    ) -> io::Result<()> {
        if self.ownership == Ownership::Preserve {
            rustix::fs::chownat(
                dir,
                name,
                Some(rustix::fs::Uid::from_raw(meta.uid)),
                Some(rustix::fs::Gid::from_raw(meta.gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )?;
        }
        if chmod {
            rustix::fs::chmodat(dir, name, Mode::from_raw_mode(meta.mode), AtFlags::empty())?;
        }
        rustix::fs::utimensat(
            dir,
            name,
            &timestamps(meta.mtime),
            AtFlags::SYMLINK_NOFOLLOW,
        )?;
        Ok(())
    }

    /// Applies directories' owners, modes and times, deepest first.
    fn finish_dirs(&mut self) -> Result<(), UnpackError> {
        let mut dirs = std::mem::take(&mut self.dirs);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.parts.len()));
        for dir in dirs {
            let shown = String::from_utf8_lossy(&join(&dir.parts)).into_owned();
            let fd = self
                .open_dir(&dir.parts, false)
                .map_err(|source| UnpackError::Io {
                    path: shown.clone(),
                    source,
                })?;
            let meta = EntryMeta {
                mode: dir.mode,
                uid: dir.uid,
                gid: dir.gid,
                mtime: dir.mtime,
            };
            self.finish_fd(fd.as_fd(), &meta)
                .map_err(|source| UnpackError::Io {
                    path: shown,
                    source,
                })?;
        }
        Ok(())
    }
}

struct EntryMeta {
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: i64,
}

fn timestamps(mtime: i64) -> Timestamps {
    let time = rustix::fs::Timespec {
        tv_sec: mtime,
        tv_nsec: 0,
    };
    Timestamps {
        last_access: time,
        last_modification: time,
    }
}

/// Splits an archive path into its components, refusing any that climbs (`..`).
fn clean(path: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut parts = Vec::new();
    for component in Path::new(OsStr::from_bytes(path)).components() {
        match component {
            Component::Normal(part) => parts.push(part.as_bytes().to_vec()),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir => return Err("the path climbs out with '..'".into()),
            Component::Prefix(_) => return Err("the path has a prefix".into()),
        }
    }
    Ok(parts)
}

fn join(parts: &[Vec<u8>]) -> Vec<u8> {
    if parts.is_empty() {
        return b".".to_vec();
    }
    parts.join(&b'/')
}

/// Removes whatever `name` is in `dir` (a whole tree for a directory); nothing if absent.
fn remove_existing(dir: &OwnedFd, name: &[u8]) -> io::Result<()> {
    let name_os = OsStr::from_bytes(name);
    match rustix::fs::statat(dir, name_os, AtFlags::SYMLINK_NOFOLLOW) {
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(err) => Err(err.into()),
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Directory => {
            // The descriptor's magic link names the real directory, whatever links its path
            // went through; the removal below it never follows links.
            let path = Path::new("/proc/self/fd")
                .join(std::os::fd::AsRawFd::as_raw_fd(dir).to_string())
                .join(name_os);
            std::fs::remove_dir_all(path)
        }
        Ok(_) => Ok(rustix::fs::unlinkat(dir, name_os, AtFlags::empty())?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Builds a tar stream from (path, kind, contents or link target, mode). Names are
    /// written raw, so an archive can hold what a careful writer would refuse (`..`).
    fn archive(entries: &[(&str, tar::EntryType, &str, u32)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, kind, data, mode) in entries {
            let mut header = tar::Header::new_old();
            header.set_entry_type(*kind);
            header.set_mode(*mode);
            header.set_mtime(1_700_000_000);
            header.set_uid(0);
            header.set_gid(0);
            let old = header.as_old_mut();
            old.name[..path.len()].copy_from_slice(path.as_bytes());
            let body: &[u8] = match kind {
                tar::EntryType::Symlink | tar::EntryType::Link => {
                    old.linkname[..data.len()].copy_from_slice(data.as_bytes());
                    &[]
                }
                _ => data.as_bytes(),
            };
            header.set_size(body.len() as u64);
            header.set_cksum();
            builder.append(&header, body).expect("append");
        }
        builder.into_inner().expect("finish tar")
    }

    fn ownership() -> Ownership {
        if rustix::process::geteuid().is_root() {
            Ownership::Preserve
        } else {
            Ownership::Current
        }
    }

    /// A sorted listing of `dir`: path, kind and, for files and links, content or target.
    fn listing(dir: &Path) -> Vec<String> {
        fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
            let mut entries: Vec<_> = std::fs::read_dir(dir)
                .expect("read dir")
                .map(|e| e.expect("entry"))
                .collect();
            entries.sort_by_key(std::fs::DirEntry::file_name);
            for entry in entries {
                let path = entry.path();
                let rel = path
                    .strip_prefix(base)
                    .expect("prefix")
                    .display()
                    .to_string();
                let meta = std::fs::symlink_metadata(&path).expect("metadata");
                let ft = meta.file_type();
                if ft.is_dir() {
                    let opaque = rustix::fs::getxattr(&path, OPAQUE_XATTR, &mut [0u8; 4]).is_ok();
                    out.push(format!(
                        "{rel}/ {:o}{}",
                        meta.permissions().mode() & 0o7777,
                        if opaque { " opaque" } else { "" }
                    ));
                    walk(base, &path, out);
                } else if ft.is_symlink() {
                    out.push(format!(
                        "{rel} -> {}",
                        std::fs::read_link(&path).expect("link").display()
                    ));
                } else if std::os::unix::fs::FileTypeExt::is_char_device(&ft) {
                    out.push(format!("{rel} whiteout {}", meta.rdev()));
                } else {
                    out.push(format!(
                        "{rel} {:o} {:?} links={}",
                        meta.permissions().mode() & 0o7777,
                        std::fs::read_to_string(&path).expect("read"),
                        meta.nlink()
                    ));
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out);
        out
    }

    #[test]
    fn a_layer_unpacks_with_whiteouts_opaque_dirs_links_and_modes() {
        use tar::EntryType::{Directory, Link, Regular, Symlink};
        let tar = archive(&[
            ("./", Directory, "", 0o755),
            ("etc/", Directory, "", 0o755),
            ("etc/motd", Regular, "hello", 0o644),
            ("etc/.wh.shadow", Regular, "", 0o644),
            ("opt/", Directory, "", 0o755),
            ("opt/.wh..wh..opq", Regular, "", 0o644),
            ("opt/app", Regular, "#!/bin/sh\n", 0o755),
            ("bin/tool", Regular, "x", 0o4755),
            ("bin/alias", Link, "bin/tool", 0o755),
            ("lib", Symlink, "usr/lib", 0o777),
            ("ro/", Directory, "", 0o555),
            ("ro/inside", Regular, "y", 0o444),
        ]);
        let dest = tempfile::tempdir().expect("tempdir");
        let got = unpack(tar.as_slice(), dest.path(), ownership()).expect("unpack");
        let digest = format!("sha256:{}", hex(&Sha256::digest(&tar)));
        assert_eq!((got.diff_id, got.size_bytes, got.entries), (digest, 17, 11));
        assert_eq!(
            listing(dest.path()),
            [
                "bin/ 755",
                "bin/alias 4755 \"x\" links=2",
                "bin/tool 4755 \"x\" links=2",
                "etc/ 755",
                "etc/motd 644 \"hello\" links=1",
                "etc/shadow whiteout 0",
                "lib -> usr/lib",
                "opt/ 755 opaque",
                "opt/app 755 \"#!/bin/sh\\n\" links=1",
                "ro/ 555",
                "ro/inside 444 \"y\" links=1",
            ]
        );
    }

    #[test]
    fn gzip_and_zstd_layers_hash_their_uncompressed_stream() {
        let tar = archive(&[("a", tar::EntryType::Regular, "abc", 0o644)]);
        let want = format!("sha256:{}", hex(&Sha256::digest(&tar)));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).expect("gzip");
        let gz = gz.finish().expect("gzip");
        let zst = ruzstd::encoding::compress_to_vec(
            tar.as_slice(),
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        for stream in [tar.clone(), gz, zst] {
            let dest = tempfile::tempdir().expect("tempdir");
            let got = unpack(stream.as_slice(), dest.path(), ownership()).expect("unpack");
            assert_eq!(got.diff_id, want);
            assert_eq!(
                std::fs::read_to_string(dest.path().join("a")).expect("read"),
                "abc"
            );
        }
    }

    #[test]
    fn links_planted_by_the_archive_cannot_lead_outside_the_layer() {
        use tar::EntryType::{Link, Regular, Symlink};
        let outside = tempfile::tempdir().expect("tempdir");
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "untouched").expect("write");
        let escape = outside.path().display().to_string();

        // Links to the root, absolute or by climbing, resolve to the layer's own root.
        let tar = archive(&[
            ("top", Symlink, "/", 0o777),
            ("top/a", Regular, "via /", 0o644),
            ("dots", Symlink, "../../../../../../..", 0o777),
            ("dots/b", Regular, "via ..", 0o644),
        ]);
        let dest = tempfile::tempdir().expect("tempdir");
        unpack(tar.as_slice(), dest.path(), ownership()).expect("unpack");
        assert_eq!(
            listing(dest.path()),
            [
                "a 644 \"via /\" links=1",
                "b 644 \"via ..\" links=1",
                "dots -> ../../../../../../..",
                "top -> /",
            ]
        );

        // A link to a host path leads nowhere inside the layer: the entry fails.
        let escapes = [
            archive(&[
                ("up", Symlink, &escape, 0o777),
                ("up/victim", Regular, "pwned", 0o644),
            ]),
            archive(&[("../escape", Regular, "pwned", 0o644)]),
            archive(&[("a/../../escape", Regular, "pwned", 0o644)]),
            archive(&[("hard", Link, "../../etc/passwd", 0o644)]),
            archive(&[("x/.wh...", Regular, "", 0o644)]),
        ];
        for tar in escapes {
            let dest = tempfile::tempdir().expect("tempdir");
            let err = unpack(tar.as_slice(), dest.path(), ownership()).unwrap_err();
            assert!(
                matches!(err, UnpackError::Entry { .. } | UnpackError::Io { .. }),
                "{err}"
            );
        }
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "untouched");
    }

    #[test]
    fn later_entries_replace_earlier_ones_of_another_kind() {
        use tar::EntryType::{Directory, Regular};
        let tar = archive(&[
            ("x/", Directory, "", 0o755),
            ("x/inner", Regular, "1", 0o644),
            ("x", Regular, "now a file", 0o600),
            ("y", Regular, "file first", 0o644),
            ("y/", Directory, "", 0o700),
        ]);
        let dest = tempfile::tempdir().expect("tempdir");
        unpack(tar.as_slice(), dest.path(), ownership()).expect("unpack");
        assert_eq!(
            listing(dest.path()),
            ["x 600 \"now a file\" links=1", "y/ 700"]
        );
    }
}
