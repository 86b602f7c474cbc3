//! The file API, carried out by the init inside the sandbox's mount namespace: every path,
//! `..` and symlink included, resolves within the sandbox's root, so none can reach the host.
//!
//! The init is not confined by Landlock, so it refuses what a confined process could not
//! reach either: files on `/proc` and `/sys` (its own memory among them) and anything but
//! regular files for reads and writes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use forge_types::{FileInfo, FileKind};

use crate::proto::{ErrorKind, RemoteError};

/// Where relative paths are resolved.
pub(crate) const WORKSPACE: &str = "/workspace";

/// Most paths a glob returns.
const GLOB_LIMIT: usize = 10_000;

const PROC_SUPER_MAGIC: i64 = 0x9fa0;
const SYSFS_MAGIC: i64 = 0x6265_6572;

/// Resolves a client path: absolute as given, relative under `/workspace`.
pub(crate) fn resolve(path: &str) -> Result<PathBuf, RemoteError> {
    if path.is_empty() {
        return Err(RemoteError::new(ErrorKind::InvalidInput, "path is empty"));
    }
    if path.contains('\0') {
        return Err(RemoteError::new(
            ErrorKind::InvalidInput,
            "path contains a NUL byte",
        ));
    }
    let path = Path::new(path);
    Ok(if path.is_absolute() {
        path.to_owned()
    } else {
        Path::new(WORKSPACE).join(path)
    })
}

/// Maps an I/O error on `path` to a classified remote error.
pub(crate) fn io_error(path: &Path, err: &io::Error) -> RemoteError {
    let kind = match err.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
        io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        io::ErrorKind::NotADirectory => ErrorKind::NotADirectory,
        io::ErrorKind::IsADirectory => ErrorKind::IsADirectory,
        io::ErrorKind::DirectoryNotEmpty => ErrorKind::DirectoryNotEmpty,
        io::ErrorKind::InvalidInput | io::ErrorKind::InvalidFilename => ErrorKind::InvalidInput,
        _ => match err.raw_os_error() {
            Some(libc::EROFS | libc::EPERM) => ErrorKind::PermissionDenied,
            Some(libc::ELOOP) => ErrorKind::InvalidInput,
            _ => ErrorKind::Other,
        },
    };
    let reason = match err.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code).to_string(),
        None => err.to_string(),
    };
    let reason = reason
        .split(" (os error")
        .next()
        .unwrap_or(&reason)
        .to_lowercase();
    RemoteError::new(kind, format!("{}: {reason}", path.display()))
}

/// Like [`io_error`], for an operation that writes: a refusal names the paths that are
/// writable, since Landlock binds the file API to them as it binds every process.
fn write_error(path: &Path, err: &io::Error) -> RemoteError {
    let mut error = io_error(path, err);
    if error.kind == ErrorKind::PermissionDenied {
        error.message = format!(
            "{} (writable paths: {})",
            error.message,
            super::confine::writable_paths().join(", ")
        );
    }
    error
}

fn refuse(path: &Path, kind: ErrorKind, why: &str) -> RemoteError {
    RemoteError::new(kind, format!("{}: {why}", path.display()))
}

/// Checks an opened file: a regular file, not on `/proc` or `/sys`.
fn check_regular(path: &Path, file: &File) -> Result<(), RemoteError> {
    let fs = rustix::fs::fstatfs(file).map_err(|e| io_error(path, &e.into()))?;
    #[expect(
        clippy::useless_conversion,
        reason = "f_type's width differs between architectures"
    )]
    let magic = i64::from(fs.f_type);
    if magic == PROC_SUPER_MAGIC || magic == SYSFS_MAGIC {
        return Err(refuse(
            path,
            ErrorKind::PermissionDenied,
            "/proc and /sys are not served by the file API",
        ));
    }
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    if meta.is_dir() {
        return Err(refuse(path, ErrorKind::IsADirectory, "is a directory"));
    }
    if !meta.is_file() {
        return Err(refuse(path, ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(())
}

/// Opens a file for reading at `offset`.
pub(crate) fn open_read(path: &str, offset: u64) -> Result<(File, PathBuf), RemoteError> {
    let path = resolve(path)?;
    let mut file = File::open(&path).map_err(|e| io_error(&path, &e))?;
    check_regular(&path, &file)?;
    if offset > 0 {
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| io_error(&path, &e))?;
    }
    Ok((file, path))
}

/// Reads the next chunk of at most `max` bytes; empty at the end.
pub(crate) fn read_chunk(file: &mut File, path: &Path, max: usize) -> Result<Vec<u8>, RemoteError> {
    let mut buf = Vec::with_capacity(max.min(1 << 20));
    file.take(max as u64)
        .read_to_end(&mut buf)
        .map_err(|e| io_error(path, &e))?;
    Ok(buf)
}

/// Opens (creating parents as needed) a file for writing.
pub(crate) fn open_write(
    path: &str,
    mode: Option<u32>,
    append: bool,
) -> Result<(File, PathBuf), RemoteError> {
    let path = resolve(path)?;
    if let Some(parent) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(|e| write_error(parent, &e))?;
    }
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .append(append)
        .mode(mode.unwrap_or(0o644) & 0o7777)
        .open(&path)
        .map_err(|e| write_error(&path, &e))?;
    check_regular(&path, &file)?;
    if !append {
        file.set_len(0).map_err(|e| write_error(&path, &e))?;
    }
    if let Some(mode) = mode {
        file.set_permissions(fs::Permissions::from_mode(mode & 0o7777))
            .map_err(|e| write_error(&path, &e))?;
    }
    Ok((file, path))
}

pub(crate) fn write_chunk(file: &mut File, path: &Path, data: &[u8]) -> Result<(), RemoteError> {
    file.write_all(data).map_err(|e| write_error(path, &e))
}

/// Metadata of `path` itself (a symlink is reported as one).
pub(crate) fn stat(path: &str) -> Result<FileInfo, RemoteError> {
    let path = resolve(path)?;
    info(&path)
}

fn info(path: &Path) -> Result<FileInfo, RemoteError> {
    let meta = fs::symlink_metadata(path).map_err(|e| io_error(path, &e))?;
    let file_type = meta.file_type();
    let kind = if file_type.is_dir() {
        FileKind::Dir
    } else if file_type.is_file() {
        FileKind::File
    } else if file_type.is_symlink() {
        FileKind::Symlink
    } else {
        FileKind::Other
    };
    let link_target = if kind == FileKind::Symlink {
        fs::read_link(path)
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    } else {
        None
    };
    let modified_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Ok(FileInfo {
        path: path.to_string_lossy().into_owned(),
        name: path
            .file_name()
            .map_or_else(|| "/".to_owned(), |n| n.to_string_lossy().into_owned()),
        kind,
        size: meta.len(),
        mode: meta.mode() & 0o7777,
        modified_ms,
        link_target,
    })
}

/// The entries of a directory, sorted by name.
pub(crate) fn list_dir(path: &str) -> Result<Vec<FileInfo>, RemoteError> {
    let path = resolve(path)?;
    let entries = fs::read_dir(&path).map_err(|e| io_error(&path, &e))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(&path, &e))?;
        // An entry that vanished between listing and stat is simply not listed.
        if let Ok(info) = info(&entry.path()) {
            out.push(info);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

pub(crate) fn mkdir(path: &str, mode: Option<u32>) -> Result<(), RemoteError> {
    let path = resolve(path)?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode.unwrap_or(0o755) & 0o7777)
        .create(&path)
        .map_err(|e| write_error(&path, &e))
}

pub(crate) fn rename(from: &str, to: &str) -> Result<(), RemoteError> {
    let from = resolve(from)?;
    let to = resolve(to)?;
    fs::symlink_metadata(&from).map_err(|e| write_error(&from, &e))?;
    if let Some(parent) = to.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(|e| write_error(parent, &e))?;
    }
    fs::rename(&from, &to).map_err(|e| write_error(&from, &e))
}

pub(crate) fn chmod(path: &str, mode: u32) -> Result<(), RemoteError> {
    let path = resolve(path)?;
    if mode > 0o7777 {
        return Err(refuse(
            &path,
            ErrorKind::InvalidInput,
            &format!("mode {mode:o} has bits beyond 7777"),
        ));
    }
    let file = File::open(&path).map_err(|e| write_error(&path, &e))?;
    let fs = rustix::fs::fstatfs(&file).map_err(|e| write_error(&path, &e.into()))?;
    #[expect(
        clippy::useless_conversion,
        reason = "f_type's width differs between architectures"
    )]
    let magic = i64::from(fs.f_type);
    if magic == PROC_SUPER_MAGIC || magic == SYSFS_MAGIC {
        return Err(refuse(
            &path,
            ErrorKind::PermissionDenied,
            "/proc and /sys are not served by the file API",
        ));
    }
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(|e| write_error(&path, &e))
}

pub(crate) fn remove(path: &str, recursive: bool) -> Result<(), RemoteError> {
    let path = resolve(path)?;
    let target = removal_target(&path).map_err(|e| write_error(&path, &e))?;
    if target == Path::new("/") {
        return Err(refuse(
            &path,
            ErrorKind::InvalidInput,
            "refusing to remove the root directory",
        ));
    }
    let meta = fs::symlink_metadata(&path).map_err(|e| write_error(&path, &e))?;
    let result = if meta.is_dir() {
        if recursive {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_dir(&path)
        }
    } else {
        fs::remove_file(&path)
    };
    result.map_err(|e| write_error(&path, &e))
}

/// What removing `path` would remove, with `..` and symlinks in its parents resolved (the
/// last component itself may be a symlink, which is removed, not followed).
fn removal_target(path: &Path) -> io::Result<PathBuf> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => fs::canonicalize(parent).map(|p| p.join(name)),
        _ => fs::canonicalize(path),
    }
}

/// Paths matching a glob pattern (`*`, `?`, `[...]`, and `**` for any depth).
pub(crate) fn glob(pattern: &str) -> Result<Vec<String>, RemoteError> {
    let absolute = resolve(pattern)?;
    let text = absolute.to_string_lossy();
    let paths = glob::glob(&text).map_err(|e| {
        RemoteError::new(
            ErrorKind::InvalidInput,
            format!("invalid pattern {pattern:?}: {}", e.msg),
        )
    })?;
    let mut out = Vec::new();
    for path in paths.flatten() {
        if out.len() == GLOB_LIMIT {
            break;
        }
        out.push(path.to_string_lossy().into_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn relative_paths_land_in_the_workspace() {
        assert_eq!(
            resolve("a/b.txt").unwrap(),
            PathBuf::from("/workspace/a/b.txt")
        );
        assert_eq!(resolve("/etc/hosts").unwrap(), PathBuf::from("/etc/hosts"));
        assert_eq!(resolve("").unwrap_err().kind, ErrorKind::InvalidInput);
        assert_eq!(resolve("a\0b").unwrap_err().kind, ErrorKind::InvalidInput);
    }

    #[test]
    fn errors_name_the_path_and_the_class() {
        let err = io_error(
            Path::new("/workspace/x"),
            &io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert_eq!(
            err,
            RemoteError::new(
                ErrorKind::NotFound,
                "/workspace/x: no such file or directory"
            )
        );
        let err = io_error(
            Path::new("/usr/x"),
            &io::Error::from_raw_os_error(libc::EROFS),
        );
        assert_eq!(err.kind, ErrorKind::PermissionDenied);
    }

    #[test]
    fn removing_the_root_is_recognised_however_it_is_spelled() {
        // Only the resolution is tested here: `remove` itself must never run on the host.
        for path in ["/", "/..", "/../..", "/tmp/..", "/usr/bin/../.."] {
            assert_eq!(
                removal_target(Path::new(path)).unwrap(),
                PathBuf::from("/"),
                "{path}"
            );
        }
        assert_eq!(
            removal_target(Path::new("/tmp/x")).unwrap(),
            PathBuf::from("/tmp/x")
        );
    }
}
