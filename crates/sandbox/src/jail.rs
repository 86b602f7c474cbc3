//! The Linux jail backend: each sandbox is a tree of processes in its own user, pid, mount,
//! ipc, uts, net and cgroup namespaces under Forge's init, with an overlay root, cgroup
//! limits, seccomp, Landlock and no capabilities.
//!
//! The host side does what needs the host's view (directories, cgroups, uid ranges) and asks
//! the helper ([`crate::helper`]) to fork the init; everything inside the sandbox goes
//! through the init's control socket ([`crate::client`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use forge_types::{
    ExecEvent, ExecRequest, ExecResult, FileInfo, NetworkMode, PortForward, ProcessId, ProcessInfo,
    ProcessOutput, ProcessSpec, ProcessState, PtySize, SandboxId, SandboxInfo, SandboxSpec,
    SandboxStats,
};
use fs_err as fs;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::task::{AbortHandle, JoinHandle};

use crate::backend::{Backend, ExecStream, SandboxError};
use crate::cgroup::{CgroupLayout, CgroupRoot, SandboxCgroup};
use crate::client::{AgentClient, Connection};
use crate::helper::{Helper, HelperCommand, Spawned};
use crate::image::Images;
use crate::layout;
use crate::net::{Allowlist, PROXY_PORT, Resolver, pasta, ports, proxy};
use crate::plan::{IdRange, Overlay, SpawnPlan};
use crate::proto::{CHUNK, ErrorKind, FrameError, RemoteError, Request, Response};
use forge_image::{Commit, IdShift, Image, ImageStore, RegistryConfig};
use forge_types::{ImageInfo, ImageSource};

/// Ids each sandbox gets in its user namespace (root mode).
const IDS_PER_SANDBOX: u32 = 65_536;

/// How many sandboxes can hold a uid range at once (root mode).
const MAX_SLOTS: u32 = 16_384;

/// Paths inside a sandbox that its processes may write to.
pub const WRITABLE_PATHS: [&str; 7] = [
    "/workspace",
    "/tmp",
    "/var/tmp",
    "/root",
    "/home",
    "/run",
    "/dev/shm",
];

/// Longest Unix socket path the kernel accepts (`sun_path` minus the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// How the jail backend is set up.
#[derive(Debug, Clone)]
pub struct JailConfig {
    /// Sandboxes' writable layers and sockets, and the image store.
    pub data_dir: PathBuf,
    pub helper: HelperCommand,
    /// First host uid (and gid) of the ranges sandboxes' ids map to, when running as root.
    pub uid_base: u32,
    /// Name of the cgroup directory created under Forge's own cgroup. Each data directory
    /// gets its own (`forge-` and a hash of its path), so that Forge processes with
    /// different data directories never touch each other's sandboxes' cgroups.
    pub cgroup_name: String,
    /// Registries, mirrors and credentials for images that are not in the store yet.
    pub registries: RegistryConfig,
    /// How the egress proxy of allowlist sandboxes resolves destination names.
    pub resolver: Resolver,
}

impl JailConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        let cgroup_name = cgroup_name_for(&data_dir);
        Self {
            data_dir,
            helper: HelperCommand::default(),
            uid_base: 1 << 20,
            cgroup_name,
            registries: RegistryConfig::default(),
            resolver: Resolver::default(),
        }
    }
}

/// `forge-` and eight hex digits of a hash of the data directory's path (FNV-1a: stable
/// across builds, unlike std's hasher).
fn cgroup_name_for(data_dir: &Path) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in data_dir.as_os_str().as_encoded_bytes() {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("forge-{hash:08x}")
}

/// Adds the directories this backend makes sandbox cgroups in to the data directory's
/// `cgroups` file (one path per line), so that whoever removes a data directory can find
/// them: they live in the cgroup file system, not below it.
fn record_cgroup_parents(data_dir: &Path, parents: &[PathBuf]) {
    let file = data_dir.join(CGROUPS_FILE);
    let mut known: Vec<PathBuf> = fs::read_to_string(&file)
        .unwrap_or_default()
        .lines()
        .map(PathBuf::from)
        .collect();
    let missing: Vec<&PathBuf> = parents.iter().filter(|p| !known.contains(p)).collect();
    if missing.is_empty() {
        return;
    }
    known.extend(missing.into_iter().cloned());
    let lines: Vec<_> = known
        .iter()
        .map(|parent| parent.to_string_lossy())
        .collect();
    if let Err(err) = fs::write(&file, lines.join("\n") + "\n") {
        tracing::warn!(file = %file.display(), error = %err, "cannot record the cgroup directories");
    }
}

/// The data directory's list of the directories its sandboxes' cgroups are made in.
pub const CGROUPS_FILE: &str = "cgroups";

/// What the sandbox needs written in its directory to be found again after a restart.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    info: SandboxInfo,
    slot: Option<u32>,
    /// The image as it was resolved at creation (the name may point elsewhere since).
    #[serde(default)]
    image: Option<Image>,
}

#[derive(Debug)]
struct Sandbox {
    info: SandboxInfo,
    image: Image,
    slot: Option<u32>,
    dir: PathBuf,
    client: AgentClient,
    pidfd: OwnedFd,
    cgroup: Option<SandboxCgroup>,
    net: SandboxNet,
}

/// The host-side tasks of a sandbox's network: its egress proxy and its port forwards.
#[derive(Debug, Default)]
struct SandboxNet {
    proxy: Mutex<Option<AbortHandle>>,
    ports: Mutex<BTreeMap<u16, (PortForward, JoinHandle<()>)>>,
}

impl SandboxNet {
    /// Stops accepting for the sandbox; connections in flight end with its processes.
    fn close(&self) {
        if let Some(proxy) = self.proxy.lock().ok().and_then(|mut p| p.take()) {
            proxy.abort();
        }
        if let Ok(mut ports) = self.ports.lock() {
            for (_, (_, task)) in std::mem::take(&mut *ports) {
                task.abort();
            }
        }
    }
}

#[derive(Debug)]
struct Inner {
    config: JailConfig,
    sandboxes_dir: PathBuf,
    privileged: bool,
    images: Images,
    dev_template: Option<PathBuf>,
    cgroups: CgroupRoot,
    /// Limits this host cannot enforce; copied into every sandbox's `degraded`.
    host_notes: Vec<String>,
    helper: tokio::sync::Mutex<Option<Helper>>,
    sandboxes: RwLock<HashMap<SandboxId, Arc<Sandbox>>>,
    /// Uid ranges in use; shared with the janitor, which frees a destroyed sandbox's range
    /// once nothing of it runs.
    slots: Arc<Mutex<BTreeSet<u32>>>,
    /// Where destroyed sandboxes' directories wait for the janitor.
    trash_dir: PathBuf,
    /// Where the helper keeps its stock of ready-made sandbox directories.
    skeletons_dir: PathBuf,
    janitor: Arc<Janitor>,
    /// Every egress connection attempt of every allowlist sandbox.
    connections: broadcast::Sender<forge_types::Connection>,
}

/// What a destroyed sandbox leaves for the janitor: its init on its way out (already sent
/// `SIGKILL`), its uid range, its directory (moved to the trash) and its cgroups.
#[derive(Debug)]
struct Remains {
    id: SandboxId,
    /// `None` when destroy already saw the init exit.
    pidfd: Option<OwnedFd>,
    slot: Option<u32>,
    slots: Arc<Mutex<BTreeSet<u32>>>,
    dir: PathBuf,
    cgroup: Option<SandboxCgroup>,
}

/// Finishes destroying sandboxes in the background: waits for the init to be gone, then
/// frees the uid range and removes the directory and cgroups. It remembers what it could
/// not do.
#[derive(Debug, Default)]
struct Janitor {
    pending: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
    failures: Mutex<Vec<String>>,
}

impl Janitor {
    fn collect(self: &Arc<Self>, remains: Remains) {
        use std::sync::atomic::Ordering;
        self.pending.fetch_add(1, Ordering::SeqCst);
        let janitor = self.clone();
        tokio::spawn(async move {
            let Remains {
                id,
                pidfd,
                slot,
                slots,
                dir,
                cgroup,
            } = remains;
            // Killing a pid namespace's init kills every process in it; until it is gone,
            // the uid range may still own running processes and must not be handed out.
            let exited = match &pidfd {
                Some(pidfd) => wait_exit(pidfd, Duration::from_secs(10)).await,
                None => true,
            };
            let mut failures = Vec::new();
            if exited {
                free_slot(&slots, slot);
            } else {
                failures.push(format!(
                    "sandbox {id}: its init did not exit within 10 s of SIGKILL; its uid range stays reserved"
                ));
            }
            let removed =
                tokio::task::spawn_blocking(move || janitor_remove(&id, &dir, cgroup.as_ref()))
                    .await
                    .unwrap_or_else(|e| vec![format!("the janitor's cleanup panicked: {e}")]);
            failures.extend(removed);
            for failure in &failures {
                tracing::warn!("{failure}");
            }
            if let Ok(mut all) = janitor.failures.lock() {
                all.extend(failures);
            }
            janitor.pending.fetch_sub(1, Ordering::SeqCst);
            janitor.idle.notify_waiters();
        });
    }

    async fn settle(&self) -> Vec<String> {
        use std::sync::atomic::Ordering;
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.pending.load(Ordering::SeqCst) == 0 {
                return self
                    .failures
                    .lock()
                    .map(|mut f| std::mem::take(&mut *f))
                    .unwrap_or_default();
            }
            idle.await;
        }
    }
}

/// Hands a uid range back.
fn free_slot(slots: &Mutex<BTreeSet<u32>>, slot: Option<u32>) {
    if let Some(slot) = slot
        && let Ok(mut slots) = slots.lock()
    {
        slots.remove(&slot);
    }
}

/// The janitor's blocking part: the cgroups (and any process still in them) and the
/// directory. Returns what failed.
fn janitor_remove(id: &SandboxId, dir: &Path, cgroup: Option<&SandboxCgroup>) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(cgroup) = cgroup {
        kill_cgroup_members(cgroup);
        if let Err(err) = cgroup.remove() {
            failures.push(format!(
                "sandbox {id}: {}",
                crate::cgroup::error_chain(&err)
            ));
        }
    }
    if let Err(err) = remove_tree(dir) {
        failures.push(format!(
            "sandbox {id}: cannot remove {}: {err}",
            dir.display()
        ));
    }
    failures
}

/// The Linux jail backend. Cheap to clone; clones share the same sandboxes.
#[derive(Debug, Clone)]
pub struct JailBackend {
    inner: Arc<Inner>,
}

/// What happened to sandboxes left behind by an earlier run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Still running and taken back under management.
    pub adopted: Vec<SandboxId>,
    /// Dead or unreachable, and cleaned up.
    pub removed: Vec<SandboxId>,
}

impl JailBackend {
    /// Prepares the data directory, the host image and cgroups, and starts the helper.
    pub fn new(config: JailConfig) -> Result<Self, SandboxError> {
        let privileged = rustix::process::geteuid().is_root();
        let data_dir = config.data_dir.clone();
        let host = |reason: String| SandboxError::Host { reason };
        if !data_dir.is_absolute() {
            return Err(host(format!(
                "the data directory {} must be an absolute path",
                data_dir.display()
            )));
        }
        let sandboxes_dir = data_dir.join("sandboxes");
        let images_dir = data_dir.join("images");
        let trash_dir = data_dir.join("trash");
        for dir in [&data_dir, &sandboxes_dir, &images_dir, &trash_dir] {
            fs::create_dir_all(dir)
                .map_err(|e| host(format!("cannot create {}: {e}", dir.display())))?;
            // Sandbox inits run as unprivileged uids and must be able to reach their own
            // directories below these.
            fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
                .map_err(|e| host(format!("cannot set permissions of {}: {e}", dir.display())))?;
        }
        if privileged {
            check_traversable(&data_dir).map_err(host)?;
        }
        let socket_len = sandboxes_dir.join("sb-00000000/ctl.sock").as_os_str().len();
        if socket_len > MAX_SOCKET_PATH {
            return Err(host(format!(
                "the data directory {} is too deep: sandbox control sockets would be {socket_len} bytes long, \
                 over the kernel's limit of {MAX_SOCKET_PATH}; choose a shorter path",
                data_dir.display()
            )));
        }
        let store = ImageStore::open(&images_dir, config.registries.clone())
            .map_err(|e| host(format!("cannot open the image store: {e}")))?;
        let images = Images::prepare(&images_dir, Arc::new(store))
            .map_err(|e| host(format!("cannot prepare the host image: {e}")))?;
        let dev_template = crate::image::prepare_dev(&images_dir);
        let layout = CgroupLayout::detect().unwrap_or_default();
        let (cgroups, mut host_notes) = CgroupRoot::prepare(&layout, &config.cgroup_name);
        record_cgroup_parents(&data_dir, &cgroups.parents());
        if !cgroups.controllers().is_empty() {
            // Off the start path: on a host that collected thousands, this takes seconds.
            std::thread::spawn(|| {
                let stale = crate::cgroup::stale_sandbox_cgroups(crate::cgroup::STALE_AFTER);
                if !stale.is_empty() {
                    let removed = crate::cgroup::remove_stale(&stale);
                    tracing::info!(
                        removed,
                        found = stale.len(),
                        "removed stale sandbox cgroups"
                    );
                }
            });
        }
        for controller in layout.missing() {
            host_notes.push(format!(
                "cgroup controller {} is not available on this host",
                controller.name()
            ));
        }
        if !privileged {
            host_notes
                .push("running without root: sandbox ids map to the caller's uid only".to_owned());
        }
        let skeletons_dir = data_dir.join("skeletons");
        let helper = Helper::start(&config.helper, &skeletons_dir).map_err(|e| {
            host(format!(
                "cannot start the sandbox helper {}: {e}",
                config.helper.program.display()
            ))
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                sandboxes_dir,
                privileged,
                images,
                dev_template,
                cgroups,
                host_notes,
                helper: tokio::sync::Mutex::new(Some(helper)),
                sandboxes: RwLock::new(HashMap::new()),
                slots: Arc::new(Mutex::new(BTreeSet::new())),
                trash_dir,
                skeletons_dir,
                janitor: Arc::new(Janitor::default()),
                connections: broadcast::channel(crate::net::LOG_CAPACITY).0,
            }),
        })
    }

    /// The image store sandboxes' root file systems come from.
    pub fn image_store(&self) -> &Arc<ImageStore> {
        self.inner.images.store()
    }

    /// Limits this host cannot enforce, for reports.
    pub fn host_notes(&self) -> Vec<String> {
        self.inner.host_notes.clone()
    }

    /// Pid of the helper process (for leak checks).
    pub async fn helper_pid(&self) -> Option<u32> {
        self.inner.helper.lock().await.as_ref().map(Helper::pid)
    }

    /// Like [`JailBackend::settle`], and also waits for the helper's background work (its
    /// stock of prepared network namespaces), so that what comes next starts from a machine
    /// with nothing pending: benchmarks measure from there.
    pub async fn quiesce(&self) -> Result<(), SandboxError> {
        let settled = self.settle().await;
        if let Some(helper) = self.inner.helper.lock().await.as_ref() {
            // A helper that fails here is restarted by the next create.
            let _ = helper.settle().await;
        }
        settled
    }

    /// Waits until everything destroyed sandboxes left behind is removed; returns what
    /// could not be (each also logged).
    pub async fn settle(&self) -> Result<(), SandboxError> {
        let failures = self.inner.janitor.settle().await;
        if failures.is_empty() {
            return Ok(());
        }
        Err(SandboxError::Host {
            reason: format!(
                "cleanup after destroyed sandboxes failed: {}",
                failures.join("; ")
            ),
        })
    }

    /// Directory that holds one directory per sandbox.
    pub fn sandboxes_dir(&self) -> &Path {
        &self.inner.sandboxes_dir
    }

    /// Cgroup directories of sandboxes that exist right now (for leak checks).
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        self.inner.cgroups.children()
    }

    /// The directories sandbox cgroups are created in, one per hierarchy.
    pub fn cgroup_parents(&self) -> Vec<PathBuf> {
        self.inner.cgroups.parents()
    }

    /// Takes back sandboxes an earlier run left running and removes the remains of dead
    /// ones, so that nothing runs unaccounted for.
    pub async fn recover(&self) -> Recovery {
        let mut recovery = Recovery::default();
        let Ok(entries) = fs::read_dir(&self.inner.sandboxes_dir) else {
            return recovery;
        };
        let dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        for dir in dirs {
            let Some(id) = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(SandboxId::parse)
            else {
                continue;
            };
            if self
                .inner
                .sandboxes
                .read()
                .is_ok_and(|s| s.contains_key(&id))
            {
                continue;
            }
            if let Some(sandbox) = self.adopt(&id, &dir).await {
                let sandbox = Arc::new(sandbox);
                // The proxy's listener died with the previous process; the init makes a
                // new one. (An open sandbox's pasta kept running on its own.)
                if let Err(err) = self.start_network(&sandbox).await {
                    tracing::warn!(sandbox = %id, error = %err, "cannot restore the sandbox's network");
                }
                if let Some(slot) = sandbox.slot
                    && let Ok(mut slots) = self.inner.slots.lock()
                {
                    slots.insert(slot);
                }
                if let Ok(mut sandboxes) = self.inner.sandboxes.write() {
                    sandboxes.insert(id.clone(), sandbox);
                }
                recovery.adopted.push(id);
            } else {
                let cgroup = self.inner.cgroups.existing(id.as_str());
                let store = self.image_store().clone();
                let holder = id.to_string();
                let _ = tokio::task::spawn_blocking(move || {
                    pasta::stop(&dir);
                    let _ = store.release(&holder);
                    // Any process still in the cgroup belongs to the dead sandbox.
                    kill_cgroup_members(&cgroup);
                    let _ = cgroup.remove();
                    let _ = remove_tree(&dir);
                })
                .await;
                recovery.removed.push(id);
            }
        }
        // Directories of sandboxes destroyed just before a crash, and cgroups nobody owns.
        let trash: Vec<PathBuf> = fs::read_dir(&self.inner.trash_dir)
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        let known: Vec<String> = self
            .inner
            .sandboxes
            .read()
            .map(|s| s.keys().map(ToString::to_string).collect())
            .unwrap_or_default();
        // Leases of sandboxes that left nothing else behind.
        let store = self.image_store().clone();
        let live = known.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let holders: Vec<String> = store
                .leases()
                .map(|l| l.into_keys().collect())
                .unwrap_or_default();
            for holder in holders {
                if SandboxId::parse(&holder).is_some() && !live.contains(&holder) {
                    let _ = store.release(&holder);
                }
            }
        })
        .await;
        let orphans: Vec<SandboxCgroup> = self
            .inner
            .cgroups
            .children()
            .iter()
            .filter_map(|dir| dir.file_name()?.to_str().map(str::to_owned))
            .filter(|name| !known.contains(name))
            .map(|name| self.inner.cgroups.existing(&name))
            .collect();
        let _ = tokio::task::spawn_blocking(move || {
            for cgroup in orphans {
                kill_cgroup_members(&cgroup);
                let _ = cgroup.remove();
            }
            for dir in trash {
                let _ = remove_tree(&dir);
            }
        })
        .await;
        recovery
    }

    async fn adopt(&self, id: &SandboxId, dir: &Path) -> Option<Sandbox> {
        let record: Record =
            serde_json::from_slice(&fs::read(dir.join("sandbox.json")).ok()?).ok()?;
        let socket = dir.join(layout::SOCKET);
        let stream = tokio::net::UnixStream::connect(&socket).await.ok()?;
        let peer = stream.peer_cred().ok()?.pid()?;
        drop(stream);
        let pid = rustix::process::Pid::from_raw(peer)?;
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
        let client = AgentClient::new(socket);
        // The init answering after the pidfd was opened proves the pidfd is its own.
        matches!(client.call(&Request::Ping).await, Ok(Response::Pong)).then_some(())?;
        let mut info = record.info;
        info.init_pid = peer;
        let image = match record.image {
            Some(image) => image,
            None => self.image_store().find(&info.spec.image).ok().flatten()?,
        };
        Some(Sandbox {
            image,
            cgroup: Some(self.inner.cgroups.existing(id.as_str()))
                .filter(|_| !self.inner.cgroups.controllers().is_empty()),
            info,
            slot: record.slot,
            dir: dir.to_owned(),
            client,
            pidfd,
            net: SandboxNet::default(),
        })
    }

    fn sandbox(&self, id: &SandboxId) -> Result<Arc<Sandbox>, SandboxError> {
        self.inner
            .sandboxes
            .read()
            .ok()
            .and_then(|s| s.get(id).cloned())
            .ok_or_else(|| SandboxError::NotFound { id: id.clone() })
    }

    fn allocate_slot(&self) -> Result<Option<u32>, SandboxError> {
        if !self.inner.privileged {
            return Ok(None);
        }
        let mut slots = self.inner.slots.lock().map_err(|_| SandboxError::Host {
            reason: "slot table poisoned".into(),
        })?;
        // Start from a random slot so that separate Forge processes on one host (each with
        // its own data directory) rarely hand out the same uid range.
        let mut seed = [0u8; 4];
        let _ = rustix::rand::getrandom(&mut seed, rustix::rand::GetRandomFlags::empty());
        let start = u32::from_ne_bytes(seed) % MAX_SLOTS;
        let slot = (0..MAX_SLOTS)
            .map(|offset| (start + offset) % MAX_SLOTS)
            .find(|s| !slots.contains(s))
            .ok_or_else(|| SandboxError::Capacity {
                reason: format!("all {MAX_SLOTS} uid ranges are in use"),
            })?;
        slots.insert(slot);
        Ok(Some(slot))
    }

    fn new_id(&self) -> SandboxId {
        loop {
            let mut bytes = [0u8; 4];
            let _ = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty());
            let id = SandboxId::from_random(bytes);
            let taken = self
                .inner
                .sandboxes
                .read()
                .is_ok_and(|s| s.contains_key(&id))
                || self.inner.sandboxes_dir.join(id.as_str()).exists();
            if !taken {
                return id;
            }
        }
    }

    /// The image `name` names, pulled first when it is missing and pulling is allowed.
    async fn resolve_image(&self, name: &str) -> Result<Image, SandboxError> {
        // The built-in image needs no lookup, and a trip to the blocking pool would cost a
        // cold start a thread wake-up.
        if name == forge_image::HOST_IMAGE {
            return Ok(Image::host());
        }
        let store = self.image_store().clone();
        let wanted = name.to_owned();
        let found = tokio::task::spawn_blocking(move || store.find(&wanted))
            .await
            .map_err(|e| SandboxError::setup("look up the image", e.to_string()))??;
        let image = match found {
            Some(image) => image,
            None if self.inner.config.registries.pull_missing => {
                tracing::info!(image = name, "image not in the store; pulling it");
                self.image_store()
                    .pull(name, &forge_image::NoProgress)
                    .await
                    .map_err(|err| match err {
                        forge_image::ImageError::Unreachable { .. } => {
                            SandboxError::ImageUnavailable {
                                image: name.to_owned(),
                                reason: err.to_string(),
                            }
                        }
                        other => other.into(),
                    })?
            }
            None => {
                return Err(forge_image::ImageError::NotFound {
                    name: name.to_owned(),
                }
                .into());
            }
        };
        if image.layers.is_empty() && image.base == forge_image::Base::Scratch {
            return Err(SandboxError::InvalidSpec(forge_types::SpecError::new(
                "image",
                format!("{name} has no layers: there is nothing to run"),
            )));
        }
        Ok(image)
    }

    /// Copies the sandbox's writable layer into the image store on top of its image.
    async fn commit(&self, sandbox: &Sandbox, name: Option<&str>) -> Result<Image, SandboxError> {
        let store = self.image_store().clone();
        let upper = sandbox.dir.join(layout::UPPER);
        let parent = sandbox.image.clone();
        let name = name.map(str::to_owned);
        let source = ImageSource::Snapshot {
            sandbox: sandbox.info.id.to_string(),
        };
        let shift = sandbox.slot.map(|slot| IdShift {
            base: self.inner.config.uid_base + slot * IDS_PER_SANDBOX,
            count: IDS_PER_SANDBOX,
        });
        let image = tokio::task::spawn_blocking(move || {
            store.commit(
                &upper,
                &Commit {
                    parent: &parent,
                    name: name.as_deref(),
                    source,
                    shift,
                },
            )
        })
        .await
        .map_err(|e| SandboxError::setup("copy the writable layer", e.to_string()))??;
        Ok(image)
    }

    /// Has the helper create the sandbox's directory and cgroups and fork its init, and
    /// waits until the init reports ready.
    async fn start(
        &self,
        id: &SandboxId,
        spec: SandboxSpec,
        image: &Image,
        slot: Option<u32>,
    ) -> Result<Started, SandboxError> {
        let inner = &self.inner;
        let root_fs = inner.images.root_fs(image);
        let (uid_map, gid_map) = match slot {
            Some(slot) => {
                let outside = inner.config.uid_base + slot * IDS_PER_SANDBOX;
                let range = IdRange {
                    inside: 0,
                    outside,
                    count: IDS_PER_SANDBOX,
                };
                (range, range)
            }
            None => (
                IdRange {
                    inside: 0,
                    outside: rustix::process::geteuid().as_raw(),
                    count: 1,
                },
                IdRange {
                    inside: 0,
                    outside: rustix::process::getegid().as_raw(),
                    count: 1,
                },
            ),
        };
        let dir = inner.sandboxes_dir.join(id.as_str());
        let cgroup =
            (!inner.cgroups.controllers().is_empty()).then(|| inner.cgroups.plan(id.as_str()));
        let plan = SpawnPlan {
            id: id.to_string(),
            sandbox_dir: dir.clone(),
            root_dir: dir.join(layout::ROOT),
            socket_path: dir.join(layout::SOCKET),
            root: Overlay {
                lower: root_fs.lower,
                upper: dir.join(layout::UPPER),
                work: dir.join(layout::WORK),
                idmapped: root_fs.idmapped,
            },
            binds: root_fs.binds,
            dev_template: inner.dev_template.clone(),
            workspace: spec.workspace.clone(),
            uid_map,
            gid_map,
            unprivileged: !inner.privileged,
            owner: slot.map(|_| uid_map.outside),
            cgroup: cgroup.clone(),
            hostname: id.to_string(),
            limits: spec.limits,
            env: sandbox_env(id, &spec, root_fs.env),
            writable: WRITABLE_PATHS.iter().map(|p| (*p).to_owned()).collect(),
            writable_root: root_fs.writable_root,
            prepared_network: spec.network != NetworkMode::Open,
        };
        let started = std::time::Instant::now();
        let spawned = match self.helper_spawn(&plan).await {
            Ok(spawned) => spawned,
            Err(err) => {
                discard(dir, cgroup, None).await;
                return Err(err);
            }
        };
        let forked = started.elapsed();
        let mut info = SandboxInfo {
            id: id.clone(),
            spec,
            init_pid: spawned.pid,
            created_at_ms: now_ms(),
            degraded: self.inner.host_notes.clone(),
        };
        info.degraded.extend(spawned.notes);
        // Written while the init sets itself up: the record is what a restart finds the
        // sandbox by.
        write_record(&dir, &info, slot, image);
        let ready = wait_ready(spawned.control).await;
        tracing::debug!(
            sandbox = %id,
            fork_us = forked.as_micros(),
            setup_us = started.elapsed().saturating_sub(forked).as_micros(),
            "sandbox init ready"
        );
        match ready {
            Ok((control, notes)) => {
                if !notes.is_empty() {
                    info.degraded.extend(notes);
                    write_record(&dir, &info, slot, image);
                }
                Ok(Started {
                    info,
                    pidfd: spawned.pidfd,
                    control,
                    cgroup,
                    dir,
                    socket: plan.socket_path,
                })
            }
            Err(message) => {
                discard(dir, cgroup, Some(spawned.pidfd)).await;
                Err(SandboxError::setup("start the sandbox init", message))
            }
        }
    }

    /// Sends a spawn request to the helper, restarting it once if it died.
    async fn helper_spawn(&self, plan: &SpawnPlan) -> Result<Spawned, SandboxError> {
        let mut helper = self.inner.helper.lock().await;
        for attempt in 0..2 {
            if helper.is_none() {
                *helper = Some(
                    Helper::start(&self.inner.config.helper, &self.inner.skeletons_dir)
                        .map_err(|e| SandboxError::setup("start the sandbox helper", e))?,
                );
            }
            let Some(current) = helper.as_ref() else {
                continue;
            };
            match current.spawn(plan).await {
                Ok(spawned) => return Ok(spawned),
                Err(crate::helper::HelperError::Io(err)) if attempt == 0 => {
                    tracing::warn!(error = %err, "sandbox helper failed; restarting it");
                    *helper = None;
                }
                Err(err) => return Err(SandboxError::setup("fork the sandbox init", err)),
            }
        }
        Err(SandboxError::Host {
            reason: "the sandbox helper keeps failing".into(),
        })
    }

    /// Connects a new (or adopted) sandbox to the network its spec asks for.
    async fn start_network(&self, sandbox: &Sandbox) -> Result<(), SandboxError> {
        let id = &sandbox.info.id;
        match sandbox.info.spec.network {
            NetworkMode::None => Ok(()),
            NetworkMode::Allowlist => {
                let allowlist = Allowlist::parse(&sandbox.info.spec.allowed_hosts)?;
                let fd = self.sandbox_socket(sandbox, PROXY_PORT, true).await?;
                let listener = std::net::TcpListener::from(fd);
                let listener = listener
                    .set_nonblocking(true)
                    .and_then(|()| tokio::net::TcpListener::from_std(listener))
                    .map_err(|e| SandboxError::setup("take the egress proxy's listener", e))?;
                let context = Arc::new(proxy::ProxyContext::new(
                    id.clone(),
                    allowlist,
                    self.inner.config.resolver.clone(),
                    self.inner.connections.clone(),
                ));
                if let Ok(mut proxy) = sandbox.net.proxy.lock()
                    && let Some(old) = proxy.replace(proxy::spawn(listener, context))
                {
                    old.abort();
                }
                Ok(())
            }
            NetworkMode::Open => {
                if pasta::pid_file(&sandbox.dir).exists() {
                    return Ok(());
                }
                let (netns, userns) =
                    match ports::sandbox_namespaces(&sandbox.dir.join(layout::SOCKET)).await {
                        Ok(Ok(namespaces)) => namespaces,
                        Ok(Err(source)) => {
                            return Err(SandboxError::Operation {
                                id: id.clone(),
                                source,
                            });
                        }
                        Err(err) => return Err(self.failure(sandbox, err).await),
                    };
                let dir = sandbox.dir.clone();
                let privileged = self.inner.privileged;
                tokio::task::spawn_blocking(move || {
                    pasta::attach(&netns, &userns, &dir, privileged)
                })
                .await
                .map_err(|e| SandboxError::setup("attach pasta", e))?
                .map_err(|e| SandboxError::setup("attach pasta for open networking", e))
            }
        }
    }

    /// A socket the sandbox's init made on the sandbox's loopback.
    async fn sandbox_socket(
        &self,
        sandbox: &Sandbox,
        port: u16,
        listen: bool,
    ) -> Result<OwnedFd, SandboxError> {
        match ports::sandbox_socket(&sandbox.dir.join(layout::SOCKET), port, listen).await {
            Ok(Ok(fd)) => Ok(fd),
            Ok(Err(source)) => Err(SandboxError::Operation {
                id: sandbox.info.id.clone(),
                source,
            }),
            Err(err) => Err(self.failure(sandbox, err).await),
        }
    }

    /// Turns a failed exchange into the right error: the sandbox is gone if its init died.
    async fn failure(&self, sandbox: &Sandbox, err: FrameError) -> SandboxError {
        if wait_exit(&sandbox.pidfd, Duration::from_millis(250)).await {
            let oom = sandbox
                .cgroup
                .as_ref()
                .and_then(|c| c.stats().oom_kills)
                .unwrap_or(0)
                > 0;
            let reason = if oom {
                "its init was killed after the sandbox ran out of memory".to_owned()
            } else {
                "its init exited".to_owned()
            };
            return SandboxError::Gone {
                id: sandbox.info.id.clone(),
                reason,
            };
        }
        SandboxError::Protocol {
            id: sandbox.info.id.clone(),
            source: err,
        }
    }

    async fn call(&self, id: &SandboxId, request: Request) -> Result<Response, SandboxError> {
        let sandbox = self.sandbox(id)?;
        match sandbox.client.call(&request).await {
            Ok(Response::Error(source)) => Err(SandboxError::Operation {
                id: id.clone(),
                source,
            }),
            Ok(response) => Ok(response),
            Err(err) => Err(self.failure(&sandbox, err).await),
        }
    }

    /// Opens a connection that a stream will own.
    async fn stream_connection(
        &self,
        sandbox: &Sandbox,
        request: &Request,
    ) -> Result<Connection, SandboxError> {
        let mut connection = match sandbox.client.connection().await {
            Ok(connection) => connection,
            Err(err) => return Err(self.failure(sandbox, err).await),
        };
        if let Err(err) = connection.send(request).await {
            return Err(self.failure(sandbox, err).await);
        }
        Ok(connection)
    }

    /// Turns a connection carrying exec output or attach frames into events, ending with
    /// the exit.
    fn stream(&self, sandbox: Arc<Sandbox>, connection: Connection) -> ExecStream {
        let backend = self.clone();
        futures::stream::unfold(Some((connection, sandbox)), move |state| {
            let backend = backend.clone();
            async move {
                let (mut connection, sandbox) = state?;
                let id = sandbox.info.id.clone();
                let (events, done): (Vec<Result<ExecEvent, SandboxError>>, bool) =
                    match connection.receive().await {
                        Ok(Response::Output { stream, data }) => {
                            (vec![Ok(ExecEvent::Output { stream, data })], false)
                        }
                        Ok(Response::Exec(result)) => (vec![Ok(ExecEvent::Exit(result))], true),
                        Ok(Response::ProcessOutput(output)) => {
                            let mut events: Vec<_> = output
                                .chunks
                                .into_iter()
                                .map(|c| {
                                    Ok(ExecEvent::Output {
                                        stream: c.stream,
                                        data: c.data,
                                    })
                                })
                                .collect();
                            let exited = match output.state {
                                ProcessState::Exited { exit_code, signal } if events.is_empty() => {
                                    events.push(Ok(ExecEvent::Exit(ExecResult {
                                        exit_code,
                                        signal,
                                        ..ExecResult::default()
                                    })));
                                    true
                                }
                                _ => false,
                            };
                            (events, exited)
                        }
                        Ok(Response::Error(source)) => {
                            (vec![Err(SandboxError::Operation { id, source })], true)
                        }
                        Ok(_) => (vec![Err(unexpected(&id, "output"))], true),
                        Err(err) => (vec![Err(backend.failure(&sandbox, err).await)], true),
                    };
                let next = if done {
                    None
                } else {
                    Some((connection, sandbox))
                };
                Some((futures::stream::iter(events), next))
            }
        })
        .flatten()
        .boxed()
    }
}

/// A started init, before the host connected to it.
struct Started {
    /// With what the host, the helper and the init could not provide in `degraded`.
    info: SandboxInfo,
    pidfd: OwnedFd,
    /// The init's first connection, past its readiness report.
    control: tokio::net::UnixStream,
    cgroup: Option<SandboxCgroup>,
    dir: PathBuf,
    socket: PathBuf,
}

/// Writes what a restart needs to adopt the sandbox into its directory. Not synced: no
/// sandbox outlives a power loss.
fn write_record(dir: &Path, info: &SandboxInfo, slot: Option<u32>, image: &Image) {
    let record = Record {
        info: info.clone(),
        slot,
        image: Some(image.clone()),
    };
    if let Ok(json) = serde_json::to_vec(&record) {
        let _ = std::fs::write(dir.join("sandbox.json"), json);
    }
}

/// Refuses a data directory sandbox uids could not reach.
fn check_traversable(dir: &Path) -> Result<(), String> {
    for ancestor in dir.ancestors().skip(1) {
        let Ok(meta) = std::fs::metadata(ancestor) else {
            continue;
        };
        if meta.permissions().mode() & 0o001 == 0 {
            return Err(format!(
                "the data directory {} is below {}, which other users cannot enter (mode {:o}); \
                 sandboxes run as unprivileged uids and need to reach it: choose a data directory \
                 such as /var/lib/forge or allow traversal with chmod o+x",
                dir.display(),
                ancestor.display(),
                meta.permissions().mode() & 0o7777
            ));
        }
    }
    Ok(())
}

/// The environment every process of the sandbox starts with: Forge's defaults, then the
/// image's, then the spec's.
fn sandbox_env(
    id: &SandboxId,
    spec: &SandboxSpec,
    image_env: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = [
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("HOME", "/root"),
        ("LANG", "C.UTF-8"),
        ("USER", "root"),
        ("TMPDIR", "/tmp"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    env.extend(image_env);
    env.insert("HOSTNAME".into(), id.to_string());
    env.insert("FORGE_SANDBOX_ID".into(), id.to_string());
    if spec.network == NetworkMode::Allowlist {
        env.extend(crate::net::proxy_env());
    }
    env.extend(spec.env.clone());
    env
}

/// Reads the init's first frame on its control connection: the connection and the init's
/// notes once it is ready, or the setup error it reported.
async fn wait_ready(control: OwnedFd) -> Result<(tokio::net::UnixStream, Vec<String>), String> {
    let stream = std::os::unix::net::UnixStream::from(control);
    let mut stream = stream
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(stream))
        .map_err(|e| format!("watching the sandbox init: {e}"))?;
    // Setup takes milliseconds; the timeout only guards against a wedged kernel call.
    let frame = tokio::time::timeout(
        Duration::from_secs(30),
        crate::proto::read_frame::<_, Response>(&mut stream),
    )
    .await;
    match frame {
        Ok(Ok(Some(Response::Ready { notes, .. }))) => Ok((stream, notes)),
        Ok(Ok(Some(Response::Error(err)))) => Err(err.message),
        Ok(Ok(Some(_))) => Err("the sandbox init sent an unexpected first frame".to_owned()),
        Ok(Ok(None)) => Err("the sandbox init exited during setup".to_owned()),
        Ok(Err(err)) => Err(format!("reading the init's report: {err}")),
        Err(_) => Err("the sandbox init did not report within 30 s".to_owned()),
    }
}

/// Removes what a sandbox that failed to start left: its init (if it was forked), cgroups
/// and directory.
async fn discard(dir: PathBuf, cgroup: Option<SandboxCgroup>, pidfd: Option<OwnedFd>) {
    if let Some(pidfd) = &pidfd {
        let _ = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL);
        wait_exit(pidfd, Duration::from_secs(10)).await;
    }
    let _ = tokio::task::spawn_blocking(move || {
        if let Some(cgroup) = &cgroup {
            kill_cgroup_members(cgroup);
            let _ = cgroup.remove();
        }
        let _ = remove_tree(&dir);
    })
    .await;
}

/// Waits up to `limit` for a process to exit; true if it has.
async fn wait_exit(pidfd: &OwnedFd, limit: Duration) -> bool {
    let Ok(fd) = pidfd.try_clone() else {
        return false;
    };
    let Ok(async_fd) = crate::sys::async_fd(fd, tokio::io::Interest::READABLE) else {
        return false;
    };
    tokio::time::timeout(limit, async_fd.readable())
        .await
        .is_ok_and(|r| r.is_ok())
}

/// Kills every process left in a sandbox's cgroups (after its init died, orphans would
/// otherwise keep the cgroup busy).
fn kill_cgroup_members(cgroup: &SandboxCgroup) {
    for procs in cgroup.procs_files() {
        let Ok(text) = std::fs::read_to_string(&procs) else {
            continue;
        };
        for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// Removes a directory tree. Overlayfs leaves directories of mode 000 in its work layer,
/// which only root can enter as they are; without root they are opened up on the way down.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(first) => {
            open_up(dir);
            std::fs::remove_dir_all(dir).map_err(|_| first)
        }
    }
}

/// Makes every directory below `dir` readable and writable by its owner, parents first so
/// that their children can be listed.
fn open_up(dir: &Path) {
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        let _ = std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(&next) {
            pending.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn unexpected(id: &SandboxId, expected: &'static str) -> SandboxError {
    SandboxError::Protocol {
        id: id.clone(),
        source: FrameError::Unexpected { expected },
    }
}

#[async_trait]
impl Backend for JailBackend {
    fn name(&self) -> &'static str {
        "jail"
    }

    fn images(&self) -> Option<Arc<ImageStore>> {
        Some(self.inner.images.store().clone())
    }

    async fn create(&self, spec: SandboxSpec) -> Result<SandboxInfo, SandboxError> {
        spec.validate()?;
        Allowlist::parse(&spec.allowed_hosts)?;
        if let Some(workspace) = &spec.workspace
            && !workspace.is_dir()
        {
            return Err(SandboxError::InvalidSpec(forge_types::SpecError::new(
                "workspace",
                format!("{} is not a directory", workspace.display()),
            )));
        }
        let image = self.resolve_image(&spec.image).await?;
        let id = self.new_id();
        self.image_store().lease(id.as_str(), &image)?;
        let slot = match self.allocate_slot() {
            Ok(slot) => slot,
            Err(err) => {
                let _ = self.image_store().release(id.as_str());
                return Err(err);
            }
        };
        let started = match self.start(&id, spec, &image, slot).await {
            Ok(started) => started,
            Err(err) => {
                free_slot(&self.inner.slots, slot);
                let _ = self.image_store().release(id.as_str());
                return Err(err);
            }
        };
        let client = AgentClient::new(started.socket.clone());
        let info = started.info;
        let sandbox = Arc::new(Sandbox {
            info: info.clone(),
            image,
            slot,
            dir: started.dir,
            client,
            pidfd: started.pidfd,
            cgroup: started.cgroup,
            net: SandboxNet::default(),
        });
        // The init's first connection is ready to serve requests.
        sandbox
            .client
            .release(Connection::established(started.control));
        if let Ok(mut sandboxes) = self.inner.sandboxes.write() {
            sandboxes.insert(id.clone(), sandbox.clone());
        }
        if let Err(err) = self.start_network(&sandbox).await {
            let _ = self.destroy(&id).await;
            return Err(err);
        }
        Ok(info)
    }

    fn connection_log(&self) -> Option<broadcast::Receiver<forge_types::Connection>> {
        Some(self.inner.connections.subscribe())
    }

    async fn expose_port(
        &self,
        id: &SandboxId,
        port: u16,
        host: std::net::SocketAddr,
    ) -> Result<PortForward, SandboxError> {
        let sandbox = self.sandbox(id)?;
        if port == 0 {
            return Err(forge_types::SpecError::new("port", "must be from 1 to 65535").into());
        }
        if let Some(forward) = sandbox
            .net
            .ports
            .lock()
            .ok()
            .and_then(|p| p.get(&port).map(|(f, _)| f.clone()))
        {
            return Err(SandboxError::Operation {
                id: id.clone(),
                source: RemoteError::new(
                    ErrorKind::AlreadyExists,
                    format!("port {port} is already exposed on {}", forward.host_address),
                ),
            });
        }
        let listener = tokio::net::TcpListener::bind(host).await.map_err(|err| {
            SandboxError::InvalidSpec(forge_types::SpecError::new(
                "host_port",
                format!("cannot listen on {host}: {err}"),
            ))
        })?;
        let address = listener
            .local_addr()
            .map_err(|e| SandboxError::setup("read the forward's address", e))?;
        let forward = PortForward {
            port,
            host_address: address.to_string(),
        };
        let task = ports::spawn(listener, sandbox.dir.join(layout::SOCKET), port);
        if let Ok(mut ports) = sandbox.net.ports.lock() {
            ports.insert(port, (forward.clone(), task));
        }
        Ok(forward)
    }

    async fn ports(&self, id: &SandboxId) -> Result<Vec<PortForward>, SandboxError> {
        let sandbox = self.sandbox(id)?;
        Ok(sandbox
            .net
            .ports
            .lock()
            .map(|p| p.values().map(|(f, _)| f.clone()).collect())
            .unwrap_or_default())
    }

    async fn unexpose_port(&self, id: &SandboxId, port: u16) -> Result<(), SandboxError> {
        let sandbox = self.sandbox(id)?;
        let removed = sandbox
            .net
            .ports
            .lock()
            .ok()
            .and_then(|mut p| p.remove(&port));
        match removed {
            Some((_, task)) => {
                // Waiting for the task drops its listener before the caller goes on.
                task.abort();
                let _ = task.await;
                Ok(())
            }
            None => Err(SandboxError::Operation {
                id: id.clone(),
                source: RemoteError::new(
                    ErrorKind::NotFound,
                    format!("port {port} is not exposed"),
                ),
            }),
        }
    }

    async fn destroy(&self, id: &SandboxId) -> Result<(), SandboxError> {
        let sandbox = self
            .inner
            .sandboxes
            .write()
            .ok()
            .and_then(|mut s| s.remove(id))
            .ok_or_else(|| SandboxError::NotFound { id: id.clone() })?;
        sandbox.client.close();
        sandbox.net.close();
        pasta::stop(&sandbox.dir);
        // Killing a pid namespace's init kills every process in it, and nothing can stop
        // that once sent: the sandbox is gone for every caller from here. Waiting for the
        // kernel to tear its namespaces down, freeing its uid range and removing its files
        // is the janitor's work, off the caller's path ([`JailBackend::settle`] waits for it).
        let _ = rustix::process::pidfd_send_signal(&sandbox.pidfd, rustix::process::Signal::KILL);
        let pidfd = match sandbox.pidfd.try_clone() {
            Ok(pidfd) => Some(pidfd),
            // Out of descriptors: wait here instead, as the janitor would have.
            Err(_) if wait_exit(&sandbox.pidfd, Duration::from_secs(10)).await => None,
            Err(_) => {
                return Err(SandboxError::Teardown {
                    id: id.clone(),
                    stage: "wait for the init to exit".into(),
                    source: "the init did not exit within 10 s of SIGKILL".into(),
                });
            }
        };
        // The image is free for `image rm` as soon as this returns (the dying overlay keeps
        // what it still has open). An image without layers (the host's) takes no lease.
        if !sandbox.image.layers.is_empty() {
            let store = self.image_store().clone();
            let holder = id.to_string();
            let _ = tokio::task::spawn_blocking(move || store.release(&holder)).await;
        }
        // Into the trash at once, so that a restart never takes it for a live sandbox.
        let trash = self.inner.trash_dir.join(id.as_str());
        let dir = match std::fs::rename(&sandbox.dir, &trash) {
            Ok(()) => trash,
            Err(_) => sandbox.dir.clone(),
        };
        self.inner.janitor.collect(Remains {
            id: id.clone(),
            pidfd,
            slot: sandbox.slot,
            slots: self.inner.slots.clone(),
            dir,
            cgroup: sandbox.cgroup.clone(),
        });
        Ok(())
    }

    async fn get(&self, id: &SandboxId) -> Result<SandboxInfo, SandboxError> {
        Ok(self.sandbox(id)?.info.clone())
    }

    async fn list(&self) -> Vec<SandboxInfo> {
        let mut infos: Vec<SandboxInfo> = self
            .inner
            .sandboxes
            .read()
            .map(|s| s.values().map(|s| s.info.clone()).collect())
            .unwrap_or_default();
        infos.sort_by(|a, b| {
            a.created_at_ms
                .cmp(&b.created_at_ms)
                .then_with(|| a.id.cmp(&b.id))
        });
        infos
    }

    async fn stats(&self, id: &SandboxId) -> Result<SandboxStats, SandboxError> {
        let sandbox = self.sandbox(id)?;
        Ok(sandbox
            .cgroup
            .as_ref()
            .map(SandboxCgroup::stats)
            .unwrap_or_default())
    }

    async fn exec(&self, id: &SandboxId, request: ExecRequest) -> Result<ExecResult, SandboxError> {
        match self
            .call(
                id,
                Request::Exec {
                    request,
                    stream: false,
                },
            )
            .await?
        {
            Response::Exec(result) => Ok(result),
            _ => Err(unexpected(id, "an exec result")),
        }
    }

    async fn exec_stream(
        &self,
        id: &SandboxId,
        request: ExecRequest,
    ) -> Result<ExecStream, SandboxError> {
        let sandbox = self.sandbox(id)?;
        let connection = self
            .stream_connection(
                &sandbox,
                &Request::Exec {
                    request,
                    stream: true,
                },
            )
            .await?;
        Ok(self.stream(sandbox, connection))
    }

    async fn spawn(&self, id: &SandboxId, spec: ProcessSpec) -> Result<ProcessInfo, SandboxError> {
        match self.call(id, Request::Spawn { spec }).await? {
            Response::Process(info) => Ok(info),
            _ => Err(unexpected(id, "a process")),
        }
    }

    async fn processes(&self, id: &SandboxId) -> Result<Vec<ProcessInfo>, SandboxError> {
        match self.call(id, Request::ListProcesses).await? {
            Response::Processes { processes } => Ok(processes),
            _ => Err(unexpected(id, "a process list")),
        }
    }

    async fn signal(
        &self,
        id: &SandboxId,
        process: ProcessId,
        signal: i32,
    ) -> Result<(), SandboxError> {
        match self
            .call(
                id,
                Request::Signal {
                    id: process,
                    signal,
                },
            )
            .await?
        {
            Response::Ok => Ok(()),
            _ => Err(unexpected(id, "ok")),
        }
    }

    async fn write_stdin(
        &self,
        id: &SandboxId,
        process: ProcessId,
        data: Vec<u8>,
        close: bool,
    ) -> Result<(), SandboxError> {
        match self
            .call(
                id,
                Request::WriteStdin {
                    id: process,
                    data,
                    close,
                },
            )
            .await?
        {
            Response::Ok => Ok(()),
            _ => Err(unexpected(id, "ok")),
        }
    }

    async fn read_output(
        &self,
        id: &SandboxId,
        process: ProcessId,
        cursor: u64,
        max_bytes: u64,
        wait_ms: u64,
    ) -> Result<ProcessOutput, SandboxError> {
        match self
            .call(
                id,
                Request::ReadOutput {
                    id: process,
                    cursor,
                    max_bytes,
                    wait_ms,
                },
            )
            .await?
        {
            Response::ProcessOutput(output) => Ok(output),
            _ => Err(unexpected(id, "process output")),
        }
    }

    async fn attach(
        &self,
        id: &SandboxId,
        process: ProcessId,
        cursor: u64,
    ) -> Result<ExecStream, SandboxError> {
        let sandbox = self.sandbox(id)?;
        let connection = self
            .stream_connection(
                &sandbox,
                &Request::Attach {
                    id: process,
                    cursor,
                },
            )
            .await?;
        Ok(self.stream(sandbox, connection))
    }

    async fn wait(
        &self,
        id: &SandboxId,
        process: ProcessId,
        timeout_ms: Option<u64>,
    ) -> Result<ProcessInfo, SandboxError> {
        match self
            .call(
                id,
                Request::Wait {
                    id: process,
                    timeout_ms,
                },
            )
            .await?
        {
            Response::Process(info) => Ok(info),
            _ => Err(unexpected(id, "a process")),
        }
    }

    async fn resize(
        &self,
        id: &SandboxId,
        process: ProcessId,
        size: PtySize,
    ) -> Result<(), SandboxError> {
        match self.call(id, Request::Resize { id: process, size }).await? {
            Response::Ok => Ok(()),
            _ => Err(unexpected(id, "ok")),
        }
    }

    async fn read_file(&self, id: &SandboxId, path: &str) -> Result<Vec<u8>, SandboxError> {
        let sandbox = self.sandbox(id)?;
        let request = Request::ReadFile {
            path: path.to_owned(),
            offset: 0,
            limit: None,
        };
        let mut connection = self.stream_connection(&sandbox, &request).await?;
        let mut data = Vec::new();
        loop {
            match connection.receive().await {
                Ok(Response::Data { data: chunk }) => data.extend_from_slice(&chunk),
                Ok(Response::Ok) => {
                    sandbox.client.release(connection);
                    return Ok(data);
                }
                Ok(Response::Error(source)) => {
                    sandbox.client.release(connection);
                    return Err(SandboxError::Operation {
                        id: id.clone(),
                        source,
                    });
                }
                Ok(_) => return Err(unexpected(id, "file data")),
                Err(err) => return Err(self.failure(&sandbox, err).await),
            }
        }
    }

    async fn write_file(
        &self,
        id: &SandboxId,
        path: &str,
        data: Vec<u8>,
        mode: Option<u32>,
    ) -> Result<(), SandboxError> {
        let sandbox = self.sandbox(id)?;
        let request = Request::WriteFile {
            path: path.to_owned(),
            mode,
            append: false,
        };
        let mut connection = self.stream_connection(&sandbox, &request).await?;
        let upload = async {
            for chunk in data.chunks(CHUNK) {
                connection
                    .send(&Request::Chunk {
                        data: chunk.to_vec(),
                    })
                    .await?;
            }
            connection.send(&Request::End).await?;
            connection.receive().await
        };
        match upload.await {
            Ok(Response::Ok) => {
                sandbox.client.release(connection);
                Ok(())
            }
            Ok(Response::Error(source)) => {
                sandbox.client.release(connection);
                Err(SandboxError::Operation {
                    id: id.clone(),
                    source,
                })
            }
            Ok(_) => Err(unexpected(id, "ok")),
            Err(err) => Err(self.failure(&sandbox, err).await),
        }
    }

    async fn list_dir(&self, id: &SandboxId, path: &str) -> Result<Vec<FileInfo>, SandboxError> {
        match self
            .call(
                id,
                Request::ListDir {
                    path: path.to_owned(),
                },
            )
            .await?
        {
            Response::Files { files } => Ok(files),
            _ => Err(unexpected(id, "a file list")),
        }
    }

    async fn stat(&self, id: &SandboxId, path: &str) -> Result<FileInfo, SandboxError> {
        match self
            .call(
                id,
                Request::Stat {
                    path: path.to_owned(),
                },
            )
            .await?
        {
            Response::Stat(info) => Ok(info),
            _ => Err(unexpected(id, "file metadata")),
        }
    }

    async fn mkdir(&self, id: &SandboxId, path: &str) -> Result<(), SandboxError> {
        match self
            .call(
                id,
                Request::Mkdir {
                    path: path.to_owned(),
                    mode: None,
                },
            )
            .await?
        {
            Response::Ok => Ok(()),
            _ => Err(unexpected(id, "ok")),
        }
    }

    async fn rename(&self, id: &SandboxId, from: &str, to: &str) -> Result<(), SandboxError> {
        match self
            .call(
                id,
                Request::Rename {
                    from: from.to_owned(),
                    to: to.to_owned(),
                },
            )
            .await?
        {
            Response::Ok => Ok(()),
            _ => Err(unexpected(id, "ok")),
        }
    }

    async fn chmod(&self, id: &SandboxId, path: &str, mode: u32) -> Result<(), SandboxError> {
        match self
            .call(
                id,
                Request::Chmod {
                    path: path.to_owned(),
                    mode,
                },
            )
            .await?
        {
            Response::Ok => Ok(()),
            _ => Err(unexpected(id, "ok")),
        }
    }

    async fn remove(
        &self,
        id: &SandboxId,
        path: &str,
        recursive: bool,
    ) -> Result<(), SandboxError> {
        match self
            .call(
                id,
                Request::Remove {
                    path: path.to_owned(),
                    recursive,
                },
            )
            .await?
        {
            Response::Ok => Ok(()),
            _ => Err(unexpected(id, "ok")),
        }
    }

    async fn glob(&self, id: &SandboxId, pattern: &str) -> Result<Vec<String>, SandboxError> {
        match self
            .call(
                id,
                Request::Glob {
                    pattern: pattern.to_owned(),
                },
            )
            .await?
        {
            Response::Paths { paths } => Ok(paths),
            _ => Err(unexpected(id, "paths")),
        }
    }

    async fn snapshot(&self, id: &SandboxId, name: &str) -> Result<ImageInfo, SandboxError> {
        let sandbox = self.sandbox(id)?;
        forge_image::reference::normalize(name)?;
        let image = self.commit(&sandbox, Some(name)).await?;
        Ok(image.info())
    }

    async fn fork(&self, id: &SandboxId) -> Result<SandboxInfo, SandboxError> {
        let sandbox = self.sandbox(id)?;
        if let Some(workspace) = &sandbox.info.spec.workspace {
            return Err(SandboxError::Unsupported {
                feature: format!(
                    "forking a sandbox whose /workspace is the host directory {} (it cannot be copied on write)",
                    workspace.display()
                ),
            });
        }
        let image = self.commit(&sandbox, None).await?;
        let mut spec = sandbox.info.spec.clone();
        spec.image.clone_from(&image.reference);
        spec.labels
            .insert("forge.forked_from".into(), id.to_string());
        let created = self.create(spec).await;
        if created.is_err() {
            // The private image was only for this fork.
            let store = self.image_store().clone();
            let _ = tokio::task::spawn_blocking(move || store.prune()).await;
        }
        created
    }
}
