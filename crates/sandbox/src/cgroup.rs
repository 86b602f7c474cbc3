//! Cgroups for sandboxes on v1 (one hierarchy per controller, as on this project's build
//! machines), v2 (the unified hierarchy) and hybrids of the two.
//!
//! Each sandbox gets one cgroup per hierarchy that carries a controller Forge uses (memory,
//! pids, cpu, cpuacct), created under a `forge` directory beneath the cgroup the Forge
//! process itself is in, so that an outer limit (a systemd unit, a container) still holds.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use forge_types::{Limits, SandboxStats};
use fs_err as fs;

/// A resource controller Forge configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Controller {
    Memory,
    Pids,
    Cpu,
    Cpuacct,
}

impl Controller {
    pub const ALL: [Self; 4] = [Self::Memory, Self::Pids, Self::Cpu, Self::Cpuacct];

    pub fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Pids => "pids",
            Self::Cpu => "cpu",
            Self::Cpuacct => "cpuacct",
        }
    }

    /// The controller that serves this one on the unified hierarchy (v2 folds cpuacct into cpu).
    fn v2_name(self) -> &'static str {
        match self {
            Self::Cpuacct => "cpu",
            other => other.name(),
        }
    }
}

/// Cgroup version of one hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Version {
    V1,
    V2,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V1 => "v1",
            Self::V2 => "v2",
        })
    }
}

/// One hierarchy Forge uses: where the Forge process sits in it and what it controls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    /// The directory of the Forge process's own cgroup in this hierarchy.
    pub own_dir: PathBuf,
    pub controllers: Vec<Controller>,
}

/// Where each controller lives on this host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CgroupLayout {
    pub hierarchies: Vec<Hierarchy>,
}

/// Why cgroups could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot create cgroup {path}")]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {value:?} to {path}")]
    Write {
        path: PathBuf,
        value: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot remove cgroup {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl CgroupLayout {
    /// Reads the layout of the running process from `/proc/self`.
    pub fn detect() -> io::Result<Self> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
        let membership = fs::read_to_string("/proc/self/cgroup")?;
        Ok(Self::parse(&mountinfo, &membership, |dir| {
            fs::read_to_string(dir.join("cgroup.controllers")).ok()
        }))
    }

    /// Builds the layout from the text of `/proc/self/mountinfo` and `/proc/self/cgroup`;
    /// `v2_controllers` reads a v2 cgroup's `cgroup.controllers`.
    pub fn parse(
        mountinfo: &str,
        membership: &str,
        v2_controllers: impl Fn(&Path) -> Option<String>,
    ) -> Self {
        let mut hierarchies: Vec<Hierarchy> = Vec::new();
        let mut unified: Option<PathBuf> = None;
        for line in mountinfo.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let fields: Vec<&str> = left.split(' ').collect();
            let sup: Vec<&str> = right.split(' ').collect();
            let (Some(root), Some(mount_point), Some(fstype), Some(options)) =
                (fields.get(3), fields.get(4), sup.first(), sup.get(2))
            else {
                continue;
            };
            match *fstype {
                "cgroup" => {
                    let controllers: Vec<Controller> = Controller::ALL
                        .into_iter()
                        .filter(|c| options.split(',').any(|o| o == c.name()))
                        .collect();
                    if controllers.is_empty() {
                        continue;
                    }
                    let Some(path) = membership_path(membership, |list| {
                        controllers
                            .iter()
                            .all(|c| list.split(',').any(|n| n == c.name()))
                    }) else {
                        continue;
                    };
                    let Some(own_dir) = join_relative(mount_point, root, path) else {
                        continue;
                    };
                    if hierarchies.iter().any(|h| h.own_dir == own_dir) {
                        continue;
                    }
                    hierarchies.push(Hierarchy {
                        version: Version::V1,
                        own_dir,
                        controllers,
                    });
                }
                "cgroup2" => {
                    if let Some(path) = membership_path(membership, str::is_empty) {
                        unified = join_relative(mount_point, root, path);
                    }
                }
                _ => {}
            }
        }
        if let Some(own_dir) = unified {
            let available = v2_controllers(&own_dir).unwrap_or_default();
            let taken: Vec<Controller> = hierarchies
                .iter()
                .flat_map(|h| h.controllers.clone())
                .collect();
            let controllers: Vec<Controller> = Controller::ALL
                .into_iter()
                .filter(|c| !taken.contains(c))
                .filter(|c| available.split_whitespace().any(|n| n == c.v2_name()))
                .collect();
            if !controllers.is_empty() {
                hierarchies.push(Hierarchy {
                    version: Version::V2,
                    own_dir,
                    controllers,
                });
            }
        }
        Self { hierarchies }
    }

    /// The hierarchy serving `controller`, if any.
    pub fn hierarchy(&self, controller: Controller) -> Option<&Hierarchy> {
        self.hierarchies
            .iter()
            .find(|h| h.controllers.contains(&controller))
    }

    /// Which controllers are missing, for reports.
    pub fn missing(&self) -> Vec<Controller> {
        Controller::ALL
            .into_iter()
            .filter(|c| self.hierarchy(*c).is_none())
            .collect()
    }
}

/// The cgroup path of this process in the hierarchy whose controller list matches.
fn membership_path(membership: &str, matches: impl Fn(&str) -> bool) -> Option<&str> {
    membership.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_id, list, path) = (parts.next()?, parts.next()?, parts.next()?);
        matches(list).then_some(path)
    })
}

/// `mount_point` + (`path` relative to the mount's `root`); `None` when the process's cgroup
/// is outside what is mounted.
fn join_relative(mount_point: &str, root: &str, path: &str) -> Option<PathBuf> {
    let relative = if root == "/" {
        path
    } else {
        path.strip_prefix(root)?
    };
    let mut dir = PathBuf::from(mount_point);
    for part in relative.split('/').filter(|p| !p.is_empty()) {
        dir.push(part);
    }
    Some(dir)
}

/// Sandbox cgroups that nothing runs in any more, anywhere on this host: directories named
/// `sb-*` below a Forge parent (`forge*`) in any cgroup hierarchy, without a process, made
/// more than `older_than` ago.
///
/// A sandbox's init stays in its cgroups for its whole life, and the helper moves it in
/// within milliseconds of making them, so such a cgroup is dead whichever Forge made it.
/// They are left when a process ends before its janitor is done and its data directory is
/// deleted (a restarted server would have removed them); thousands of them make every
/// cgroup attach on the host slow, whoever does it.
pub fn stale_sandbox_cgroups(older_than: Duration) -> Vec<PathBuf> {
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut pending: Vec<(PathBuf, usize)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mount_point = left.split(' ').nth(4)?;
            matches!(right.split(' ').next(), Some("cgroup" | "cgroup2"))
                .then(|| (PathBuf::from(mount_point), 0))
        })
        .collect();
    let mut stale = Vec::new();
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let forge_parent = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("forge"));
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            let sandbox = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("sb-"));
            if forge_parent && sandbox {
                if is_stale(&path, older_than) {
                    stale.push(path);
                }
            } else if depth < STALE_SEARCH_DEPTH {
                pending.push((path, depth + 1));
            }
        }
    }
    // A hierarchy mounted twice is walked twice.
    stale.sort();
    stale.dedup();
    stale
}

/// How deep below a hierarchy's root Forge parents are looked for.
const STALE_SEARCH_DEPTH: usize = 8;

fn is_stale(dir: &Path, older_than: Duration) -> bool {
    let empty =
        std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty());
    let old = std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .is_ok_and(|made| made.elapsed().is_ok_and(|age| age >= older_than));
    empty && old
}

/// Removes the `stale` cgroups (see [`stale_sandbox_cgroups`]); returns how many it
/// removed. A cgroup that gained a process meanwhile cannot be removed and stays.
pub fn remove_stale(stale: &[PathBuf]) -> usize {
    stale
        .iter()
        .filter(|dir| std::fs::remove_dir(dir).is_ok())
        .count()
}

/// How long a sandbox cgroup must have existed without a process to count as stale.
pub const STALE_AFTER: Duration = Duration::from_mins(1);

/// The directories under which sandbox cgroups are created, one per hierarchy.
#[derive(Debug, Clone)]
pub struct CgroupRoot {
    bases: Vec<(Hierarchy, PathBuf)>,
}

impl CgroupRoot {
    /// Creates `<own cgroup>/<name>` in every hierarchy and, on v2, enables the controllers
    /// for it. Hierarchies where that fails are left out and described in the returned notes.
    pub fn prepare(layout: &CgroupLayout, name: &str) -> (Self, Vec<String>) {
        let mut bases = Vec::new();
        let mut notes = Vec::new();
        for hierarchy in &layout.hierarchies {
            let base = hierarchy.own_dir.join(name);
            let result = fs::create_dir_all(&base)
                .and_then(|()| {
                    // An existing directory (made by root earlier) is no use if this user
                    // cannot create cgroups in it: cgroups are not delegated to it.
                    rustix::fs::access(
                        &base,
                        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
                    )
                    .map_err(io::Error::from)
                })
                .map_err(|source| CgroupError::Create {
                    path: base.clone(),
                    source,
                })
                .and_then(|()| match hierarchy.version {
                    Version::V1 => Ok(()),
                    Version::V2 => enable_v2_controllers(hierarchy, &base),
                });
            match result {
                Ok(()) => bases.push((hierarchy.clone(), base)),
                Err(err) => notes.push(format!(
                    "cgroup {} controllers {} unavailable: {}",
                    hierarchy.version,
                    names(&hierarchy.controllers),
                    error_chain(&err)
                )),
            }
        }
        (Self { bases }, notes)
    }

    /// Controllers that sandboxes will get.
    pub fn controllers(&self) -> Vec<Controller> {
        self.bases
            .iter()
            .flat_map(|(h, _)| h.controllers.clone())
            .collect()
    }

    /// Where the cgroups of sandbox `id` go (nothing is created yet).
    pub fn plan(&self, id: &str) -> SandboxCgroup {
        SandboxCgroup {
            dirs: self
                .bases
                .iter()
                .map(|(h, base)| (h.version, h.controllers.clone(), base.join(id)))
                .collect(),
        }
    }

    /// Re-attaches to the cgroups of a sandbox created earlier (after a restart).
    pub fn existing(&self, id: &str) -> SandboxCgroup {
        SandboxCgroup {
            dirs: self
                .bases
                .iter()
                .map(|(h, base)| (h.version, h.controllers.clone(), base.join(id)))
                .filter(|(_, _, dir)| dir.is_dir())
                .collect(),
        }
    }

    /// The base directories, one per hierarchy.
    pub fn parents(&self) -> Vec<PathBuf> {
        self.bases.iter().map(|(_, base)| base.clone()).collect()
    }

    /// Directories of sandbox cgroups present under the bases, for leak checks.
    pub fn children(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (_, base) in &self.bases {
            if let Ok(entries) = fs::read_dir(base) {
                out.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
        }
        out
    }
}

fn enable_v2_controllers(hierarchy: &Hierarchy, base: &Path) -> Result<(), CgroupError> {
    let wanted: Vec<&str> = hierarchy.controllers.iter().map(|c| c.v2_name()).collect();
    let mut names: Vec<&str> = wanted.clone();
    names.dedup();
    let value = names
        .iter()
        .map(|name| format!("+{name}"))
        .collect::<Vec<_>>()
        .join(" ");
    for dir in [&hierarchy.own_dir, &base.to_path_buf()] {
        let path = dir.join("cgroup.subtree_control");
        let current = fs::read_to_string(&path).unwrap_or_default();
        if wanted
            .iter()
            .all(|w| current.split_whitespace().any(|c| c == *w))
        {
            continue;
        }
        write_file(&path, &value)?;
    }
    Ok(())
}

/// The cgroups of one sandbox.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SandboxCgroup {
    dirs: Vec<(Version, Vec<Controller>, PathBuf)>,
}

impl SandboxCgroup {
    fn dir(&self, controller: Controller) -> Option<(Version, &Path)> {
        self.dirs
            .iter()
            .find(|(_, controllers, _)| controllers.contains(&controller))
            .map(|(v, _, d)| (*v, d.as_path()))
    }

    /// Creates the cgroups and writes the limits; on failure nothing is left behind.
    pub fn create(&self, limits: &Limits) -> Result<(), CgroupError> {
        for (_, _, dir) in &self.dirs {
            match fs::create_dir(dir) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    let _ = self.remove();
                    return Err(CgroupError::Create {
                        path: dir.clone(),
                        source,
                    });
                }
            }
        }
        if let Err(err) = self.apply(limits) {
            let _ = self.remove();
            return Err(err);
        }
        Ok(())
    }

    /// Whether any controller is configured.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    fn apply(&self, limits: &Limits) -> Result<(), CgroupError> {
        if let Some((version, dir)) = self.dir(Controller::Memory) {
            let bytes = limits.memory_bytes.to_string();
            match version {
                Version::V1 => {
                    write_file(&dir.join("memory.limit_in_bytes"), &bytes)?;
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write_file(&memsw, &bytes)?;
                    }
                }
                Version::V2 => {
                    write_file(&dir.join("memory.max"), &bytes)?;
                    let swap = dir.join("memory.swap.max");
                    if swap.exists() {
                        write_file(&swap, "0")?;
                    }
                }
            }
        }
        if let Some((_, dir)) = self.dir(Controller::Pids) {
            write_file(&dir.join("pids.max"), &limits.pids.to_string())?;
        }
        if let Some((version, dir)) = self.dir(Controller::Cpu) {
            const PERIOD_US: u64 = 100_000;
            let quota = u64::from(limits.cpu_millis) * PERIOD_US / 1000;
            match version {
                Version::V1 => {
                    write_file(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                    write_file(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                }
                Version::V2 => write_file(&dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?,
            }
        }
        Ok(())
    }

    /// The `cgroup.procs` files a process is written to so that it joins every cgroup.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|(_, _, dir)| dir.join("cgroup.procs"))
            .collect()
    }

    /// The file whose `oom_kill` counter says how often the OOM killer struck.
    pub fn oom_events_file(&self) -> Option<PathBuf> {
        self.dir(Controller::Memory)
            .map(|(version, dir)| match version {
                Version::V1 => dir.join("memory.oom_control"),
                Version::V2 => dir.join("memory.events"),
            })
    }

    /// Reads current usage.
    pub fn stats(&self) -> SandboxStats {
        let mut stats = SandboxStats::default();
        if let Some((version, dir)) = self.dir(Controller::Memory) {
            let (current, peak, limit) = match version {
                Version::V1 => (
                    "memory.usage_in_bytes",
                    "memory.max_usage_in_bytes",
                    "memory.limit_in_bytes",
                ),
                Version::V2 => ("memory.current", "memory.peak", "memory.max"),
            };
            stats.memory_bytes = read_number(&dir.join(current));
            stats.memory_peak_bytes = read_number(&dir.join(peak));
            stats.memory_limit_bytes = read_number(&dir.join(limit));
            stats.oom_kills = self
                .oom_events_file()
                .and_then(|p| fs::read_to_string(p).ok())
                .and_then(|t| oom_kill_count(&t));
        }
        if let Some((_, dir)) = self.dir(Controller::Pids) {
            stats.pids = read_number(&dir.join("pids.current"));
            stats.pids_limit = read_number(&dir.join("pids.max"));
        }
        if let Some((version, dir)) = self.dir(Controller::Cpuacct) {
            stats.cpu_usage_ns = match version {
                Version::V1 => read_number(&dir.join("cpuacct.usage")),
                Version::V2 => fs::read_to_string(dir.join("cpu.stat"))
                    .ok()
                    .and_then(|text| {
                        text.lines()
                            .find_map(|l| l.strip_prefix("usage_usec "))
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .map(|us| us * 1000)
                    }),
            };
        }
        stats
    }

    /// Removes the cgroups. The sandbox's processes must be gone; a cgroup that is still
    /// busy for a moment after its last task exited is retried.
    pub fn remove(&self) -> Result<(), CgroupError> {
        let mut first_error = None;
        for (_, _, dir) in &self.dirs {
            let mut attempt = 0;
            loop {
                match fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => break,
                    Err(err) if err.raw_os_error() == Some(libc::EBUSY) && attempt < 200 => {
                        attempt += 1;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(source) => {
                        first_error.get_or_insert(CgroupError::Remove {
                            path: dir.clone(),
                            source,
                        });
                        break;
                    }
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The `oom_kill` counter from `memory.oom_control` (v1) or `memory.events` (v2).
pub fn oom_kill_count(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|v| v.trim().parse().ok())
}

fn read_number(path: &Path) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    if text == "max" {
        return None;
    }
    text.parse().ok()
}

fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(|source| CgroupError::Write {
        path: path.to_owned(),
        value: value.to_owned(),
        source,
    })
}

fn names(controllers: &[Controller]) -> String {
    controllers
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const HYBRID_MOUNTINFO: &str = "\
24 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 24 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
33 30 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
35 30 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const HYBRID_CGROUP: &str = "\
8:pids:/
4:memory:/process_api/abc
2:cpuacct:/
1:cpu:/
0::/
";

    #[test]
    fn hybrid_v1_layout_is_found_under_the_process_cgroup() {
        let layout =
            CgroupLayout::parse(HYBRID_MOUNTINFO, HYBRID_CGROUP, |_| Some("hugetlb".into()));
        let want = CgroupLayout {
            hierarchies: vec![
                Hierarchy {
                    version: Version::V1,
                    own_dir: "/sys/fs/cgroup/cpu".into(),
                    controllers: vec![Controller::Cpu],
                },
                Hierarchy {
                    version: Version::V1,
                    own_dir: "/sys/fs/cgroup/cpuacct".into(),
                    controllers: vec![Controller::Cpuacct],
                },
                Hierarchy {
                    version: Version::V1,
                    own_dir: "/sys/fs/cgroup/memory/process_api/abc".into(),
                    controllers: vec![Controller::Memory],
                },
                Hierarchy {
                    version: Version::V1,
                    own_dir: "/sys/fs/cgroup/pids".into(),
                    controllers: vec![Controller::Pids],
                },
            ],
        };
        assert_eq!(layout, want);
        assert_eq!(layout.missing(), vec![]);
    }

    #[test]
    fn pure_v2_layout_uses_the_unified_hierarchy() {
        let mountinfo = "29 24 0:25 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let layout = CgroupLayout::parse(mountinfo, "0::/user.slice/forge.service\n", |dir| {
            assert_eq!(dir, Path::new("/sys/fs/cgroup/user.slice/forge.service"));
            Some("cpuset cpu io memory pids".into())
        });
        let want = CgroupLayout {
            hierarchies: vec![Hierarchy {
                version: Version::V2,
                own_dir: "/sys/fs/cgroup/user.slice/forge.service".into(),
                controllers: Controller::ALL.to_vec(),
            }],
        };
        assert_eq!(layout, want);
    }

    #[test]
    fn co_mounted_v1_controllers_share_one_hierarchy() {
        let mountinfo =
            "31 30 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let layout = CgroupLayout::parse(mountinfo, "3:cpu,cpuacct:/docker/x\n", |_| None);
        assert_eq!(
            layout.hierarchies,
            vec![Hierarchy {
                version: Version::V1,
                own_dir: "/sys/fs/cgroup/cpu,cpuacct/docker/x".into(),
                controllers: vec![Controller::Cpu, Controller::Cpuacct],
            }]
        );
        assert_eq!(layout.missing(), vec![Controller::Memory, Controller::Pids]);
    }

    #[test]
    fn v2_limits_are_written_to_a_fake_cgroupfs() {
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join("own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("cgroup.subtree_control"), "").unwrap();
        let layout = CgroupLayout {
            hierarchies: vec![Hierarchy {
                version: Version::V2,
                own_dir: own.clone(),
                controllers: Controller::ALL.to_vec(),
            }],
        };
        let (cgroups, notes) = CgroupRoot::prepare(&layout, "forge");
        assert_eq!(notes, Vec::<String>::new());
        assert_eq!(
            std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(),
            "+memory +pids +cpu"
        );
        let limits = Limits {
            memory_bytes: 64 << 20,
            pids: 32,
            cpu_millis: 1500,
            ..Limits::default()
        };
        let sandbox = cgroups.plan("sb-00000001");
        sandbox.create(&limits).unwrap();
        let dir = own.join("forge/sb-00000001");
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        assert_eq!(
            (read("memory.max"), read("pids.max"), read("cpu.max")),
            ("67108864".into(), "32".into(), "150000 100000".into())
        );
        assert_eq!(sandbox.oom_events_file(), Some(dir.join("memory.events")));
    }

    #[test]
    fn oom_counters_parse() {
        assert_eq!(
            oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"),
            Some(3)
        );
        assert_eq!(
            oom_kill_count("low 0\nhigh 0\nmax 1\noom 1\noom_kill 1\n"),
            Some(1)
        );
        assert_eq!(oom_kill_count("under_oom 0\n"), None);
    }
}
