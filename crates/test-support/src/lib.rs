//! Helpers shared by Forge's test suites: short-pathed temporary data directories,
//! the sandbox helper entry for test binaries, probes for leak checks, and OCI images and a
//! registry to pull them from ([`oci`]), and an HTTP server that plays the internet ([`http`]).

pub mod http;
pub mod oci;

use std::path::{Path, PathBuf};

/// Makes a test binary able to act as the sandbox helper: the jail backend re-executes
/// the running binary with `__init`, so every test binary that starts sandboxes needs this
/// once at its root (it runs before `main`, while the process is still single-threaded).
///
/// The calling crate needs `ctor` and `forge-sandbox` as dev-dependencies.
#[macro_export]
macro_rules! sandbox_helper {
    () => {
        #[::ctor::ctor(unsafe)]
        fn forge_sandbox_helper_entry() {
            ::forge_sandbox::run_if_helper();
        }
    };
}

/// A temporary data directory with a short path (control sockets live below it and Unix
/// socket paths are limited to 107 bytes). Removed on drop.
pub fn data_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("forge-test-")
        .tempdir_in("/tmp")
        .unwrap_or_else(|err| panic!("cannot create a temporary data directory in /tmp: {err}"))
}

/// Whether this process may create sandboxes with every confinement (root, as in CI).
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

/// Number of open file descriptors of a process.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// Direct children of a process (from its main thread's `children` file).
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Lines of this process's mount table that mention `path`.
pub fn mounts_under(path: &Path) -> Vec<String> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_owned)
        .collect()
}

/// Entries of a directory (empty when it does not exist).
pub fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).map_or_else(|_| Vec::new(), |e| e.flatten().map(|e| e.path()).collect())
}
