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
/// running from it are killed and their cgroups removed: sandboxes outlive a dropped
/// backend or a killed server on purpose (a restart adopts them, and its recovery removes
/// what dead ones left), so a test that ends without destroying every sandbox, or before
/// the janitor is done, would otherwise leave inits running and cgroups behind. Thousands
/// of stale memory cgroups slow every later cgroup operation on the machine.
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
        remove_cgroups(self.path());
        // The helper may still be stocking sandbox directories here (it lives as long as
        // the backend, which can outlive this value): removing is retried until it wins.
        for _ in 0..100 {
            match std::fs::remove_dir_all(self.path()) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                _ => return,
            }
        }
    }
}

/// Removes the cgroups of `data_dir`'s sandboxes and the directories they were made in
/// (listed in its `cgroups` file, see `forge_sandbox::CGROUPS_FILE`), waiting up to five
/// seconds for killed processes to leave them.
pub fn remove_cgroups(data_dir: &Path) {
    let Ok(listing) = std::fs::read_to_string(data_dir.join("cgroups")) else {
        return;
    };
    let parents: Vec<PathBuf> = listing.lines().map(PathBuf::from).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let mut left = false;
        for parent in parents.iter().filter(|p| p.exists()) {
            for child in entries(parent).into_iter().filter(|c| c.is_dir()) {
                left |= std::fs::remove_dir(child).is_err();
            }
            left |= std::fs::remove_dir(parent).is_err();
        }
        if !left || std::time::Instant::now() > deadline {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
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
