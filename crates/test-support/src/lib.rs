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
/// socket paths are limited to 107 bytes). Removed on drop, after the sandboxes still
/// running from it are killed: sandboxes outlive a dropped backend or a killed server on
/// purpose (a restart adopts them), so a test that ends without destroying every sandbox
/// would otherwise leave their inits running.
pub fn data_dir() -> DataDir {
    DataDir(
        tempfile::Builder::new()
            .prefix("forge-test-")
            .tempdir_in("/tmp")
            .unwrap_or_else(|err| {
                panic!("cannot create a temporary data directory in /tmp: {err}")
            }),
    )
}

/// See [`data_dir`].
#[derive(Debug)]
pub struct DataDir(tempfile::TempDir);

impl DataDir {
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for DataDir {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        kill_sandboxes(self.path());
    }
}

/// Kills the init of every sandbox running from `data_dir` (found through its control
/// socket: the peer of a connection is the init itself, whatever its pid namespace).
pub fn kill_sandboxes(data_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(data_dir.join("sandboxes")) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(stream) = std::os::unix::net::UnixStream::connect(entry.path().join("ctl.sock"))
        else {
            continue;
        };
        if let Ok(peer) = rustix::net::sockopt::socket_peercred(&stream) {
            let _ = rustix::process::kill_process(peer.pid, rustix::process::Signal::KILL);
        }
    }
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
