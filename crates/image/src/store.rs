//! The store on disk: an index of images, content-addressed blobs, unpacked layers and the
//! leases that keep layers alive while sandboxes and templates use them.
//!
//! ```text
//! <root>/index.json             every image: name, id, layers (bottom first), settings
//! <root>/lock                   flock(2) serialising changes across processes
//! <root>/blobs/sha256/<hex>     manifests and configurations, named by their digest
//! <root>/layers/<id>/root/      one unpacked layer in overlayfs's own format
//! <root>/layers/<id>/layer.json its size and the digest of the tar it came from
//! <root>/leases/<holder>.json   the layers a sandbox or template is using
//! <root>/tmp/<pid>-<nonce>/     work in progress, renamed into place when complete
//! ```
//!
//! Layers are directories shared read-only by every sandbox that uses them; nothing is
//! copied per sandbox. Each is unpacked into `tmp/` and renamed into `layers/` only once it
//! is complete and verified, and the index is replaced atomically (write, fsync, rename), so
//! a crash leaves either the old state or the new one, and at worst an orphaned temporary
//! directory that [`ImageStore::prune`] removes.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use forge_types::{ImageInfo, ImageSource, PruneReport};
use fs_err as fs;
use serde::{Deserialize, Serialize};

use crate::reference;
use crate::registry::RegistryConfig;
use crate::{HOST_IMAGE, ImageError};

const INDEX_VERSION: u32 = 1;

/// Where an image's bottom layer sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Base {
    /// The layers are the whole file system.
    #[default]
    Scratch,
    /// The layers sit on the host base: the host's `/usr` and `/etc`, read-only.
    Host,
}

/// The settings a process in the image starts with, from the image's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunConfig {
    /// `NAME=value` pairs.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub user: Option<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
}

impl RunConfig {
    /// The environment as pairs, later entries winning.
    pub fn env_pairs(&self) -> BTreeMap<String, String> {
        self.env
            .iter()
            .filter_map(|entry| entry.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

/// One image in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// Fully qualified name: `docker.io/library/alpine:latest`.
    pub reference: String,
    /// `sha256:` digest of its configuration (or, for images Forge made, of its parts).
    pub id: String,
    /// Digest of the manifest it was pulled by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default)]
    pub base: Base,
    /// Layer ids, bottom first.
    pub layers: Vec<String>,
    #[serde(default)]
    pub config: RunConfig,
    pub size_bytes: u64,
    pub created_at: jiff::Timestamp,
    pub source: ImageSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Made for one sandbox (a fork) and removed with it; not listed.
    #[serde(default)]
    pub hidden: bool,
}

impl Image {
    /// The built-in host base, which has no layers of its own.
    pub fn host() -> Self {
        Self {
            reference: HOST_IMAGE.to_owned(),
            id: HOST_IMAGE.to_owned(),
            digest: None,
            base: Base::Host,
            layers: Vec::new(),
            config: RunConfig::default(),
            size_bytes: 0,
            created_at: jiff::Timestamp::UNIX_EPOCH,
            source: ImageSource::Host,
            parent: None,
            hidden: false,
        }
    }

    /// The short name people write.
    pub fn name(&self) -> String {
        reference::short(&self.reference)
    }

    pub fn info(&self) -> ImageInfo {
        ImageInfo {
            name: self.name(),
            reference: self.reference.clone(),
            id: self.id.clone(),
            digest: self.digest.clone(),
            layers: self.layers.len(),
            size_bytes: self.size_bytes,
            created_at: self.created_at.to_string(),
            source: self.source.clone(),
            parent: self.parent.as_deref().map(reference::short),
        }
    }
}

/// Facts about one unpacked layer, kept beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LayerMeta {
    pub(crate) id: String,
    /// Digest of the uncompressed tar it was unpacked from, if it came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) diff_id: Option<String>,
    pub(crate) size_bytes: u64,
    pub(crate) entries: u64,
    pub(crate) created_at: jiff::Timestamp,
}

/// What one holder (a sandbox, a template) is using.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub image: String,
    pub layers: Vec<String>,
    /// The image is a fork's private one, removed with its last holder.
    #[serde(default)]
    pub hidden: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    version: u32,
    images: Vec<Image>,
}

/// Whose ids files in unpacked layers get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// Running as root: files keep the owners the image gives them; sandboxes see them
    /// through idmapped mounts.
    Preserve,
    /// Unprivileged: every file belongs to the current user, who is root inside sandboxes.
    Current,
}

/// The image store under one directory.
#[derive(Debug)]
pub struct ImageStore {
    root: PathBuf,
    pub(crate) registries: RegistryConfig,
    pub(crate) ownership: Ownership,
}

impl ImageStore {
    /// Opens (creating it if missing) the store under `root`. The directory is closed to
    /// other users: layers unpacked as root keep their owners and modes, set-id bits included.
    pub fn open(root: impl Into<PathBuf>, registries: RegistryConfig) -> Result<Self, ImageError> {
        let root = root.into();
        for dir in ["", "blobs/sha256", "layers", "leases", "tmp"] {
            let path = root.join(dir);
            fs::create_dir_all(&path).map_err(ImageError::io("create", &path))?;
        }
        let layers = root.join("layers");
        fs::set_permissions(&layers, std::fs::Permissions::from_mode(0o700))
            .map_err(ImageError::io("restrict", &layers))?;
        let ownership = if rustix::process::geteuid().is_root() {
            Ownership::Preserve
        } else {
            Ownership::Current
        };
        Ok(Self {
            root,
            registries,
            ownership,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn registries(&self) -> &RegistryConfig {
        &self.registries
    }

    /// Whether layers keep the owners their images give them (the store runs as root), in
    /// which case sandboxes must see them through idmapped mounts.
    pub fn preserves_owners(&self) -> bool {
        self.ownership == Ownership::Preserve
    }

    /// The directory holding layer `id`'s files.
    pub fn layer_dir(&self, id: &str) -> PathBuf {
        self.layers_dir().join(id).join("root")
    }

    /// The directory holding every layer (each in `<id>/root`).
    pub fn layers_dir(&self) -> PathBuf {
        self.root.join("layers")
    }

    pub(crate) fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.root.join("blobs/sha256").join(hex)
    }

    /// Every image but forks' private ones, the host base first.
    pub fn list(&self) -> Result<Vec<Image>, ImageError> {
        let mut images = vec![Image::host()];
        let mut stored: Vec<Image> = self
            .read_index()?
            .images
            .into_iter()
            .filter(|image| !image.hidden)
            .collect();
        stored.sort_by(|a, b| a.reference.cmp(&b.reference));
        images.extend(stored);
        Ok(images)
    }

    /// The image called `name` (any form of it), or whose id starts with `name`.
    pub fn find(&self, name: &str) -> Result<Option<Image>, ImageError> {
        if name == HOST_IMAGE {
            return Ok(Some(Image::host()));
        }
        let index = self.read_index()?;
        Ok(find_in(&index.images, name).cloned())
    }

    /// Like [`ImageStore::find`], but a missing image is an error that says how to get it.
    pub fn get(&self, name: &str) -> Result<Image, ImageError> {
        self.find(name)?.ok_or_else(|| ImageError::NotFound {
            name: name.to_owned(),
        })
    }

    /// Adds `image`, replacing any image of the same name (whose layers stay until pruned if
    /// nothing else uses them).
    pub fn insert(&self, image: Image) -> Result<(), ImageError> {
        let _lock = self.lock()?;
        let mut index = self.read_index()?;
        index.images.retain(|i| i.reference != image.reference);
        index.images.push(image);
        self.write_index(&index)
    }

    /// Removes the image called `name` and deletes the layers nothing else uses. An image a
    /// sandbox or template is using is refused unless `force`; even then its layers stay
    /// until the last user is gone.
    pub fn remove(&self, name: &str, force: bool) -> Result<PruneReport, ImageError> {
        if name == HOST_IMAGE {
            return Err(ImageError::InUse {
                name: name.to_owned(),
                holders: "every host-based sandbox (it is built in)".into(),
            });
        }
        let _lock = self.lock()?;
        let mut index = self.read_index()?;
        let image = find_in(&index.images, name)
            .cloned()
            .ok_or_else(|| ImageError::NotFound {
                name: name.to_owned(),
            })?;
        let leases = self.read_leases()?;
        let holders: Vec<&str> = leases
            .iter()
            .filter(|(_, lease)| lease.image == image.reference)
            .map(|(holder, _)| holder.as_str())
            .collect();
        if !holders.is_empty() && !force {
            return Err(ImageError::InUse {
                name: image.name(),
                holders: holders.join(", "),
            });
        }
        index.images.retain(|i| i.reference != image.reference);
        self.write_index(&index)?;
        let mut report = self.collect_layers(&index, &leases)?;
        report.images.insert(0, image.name());
        Ok(report)
    }

    /// Deletes forks' images nobody uses, layers no image or holder uses, blobs no image
    /// refers to, and work left behind by crashed processes.
    pub fn prune(&self) -> Result<PruneReport, ImageError> {
        let _lock = self.lock()?;
        let leases = self.read_leases()?;
        let mut index = self.read_index()?;
        let mut report = PruneReport::default();
        let in_use: BTreeSet<&str> = leases.values().map(|l| l.image.as_str()).collect();
        let (orphans, kept): (Vec<Image>, Vec<Image>) = index
            .images
            .into_iter()
            .partition(|i| i.hidden && !in_use.contains(i.reference.as_str()));
        index.images = kept;
        if !orphans.is_empty() {
            self.write_index(&index)?;
            report.images.extend(orphans.iter().map(Image::name));
        }
        let layers = self.collect_layers(&index, &leases)?;
        report.layers = layers.layers;
        report.freed_bytes = layers.freed_bytes;
        self.collect_blobs(&index);
        self.collect_tmp();
        Ok(report)
    }

    /// Records that `holder` uses `image`, so its layers outlive the image's removal.
    pub fn lease(&self, holder: &str, image: &Image) -> Result<(), ImageError> {
        if image.layers.is_empty() {
            return Ok(());
        }
        let lease = Lease {
            image: image.reference.clone(),
            layers: image.layers.clone(),
            hidden: image.hidden,
        };
        let path = self.lease_path(holder)?;
        let bytes = serde_json::to_vec(&lease).map_err(|source| ImageError::Index {
            path: path.clone(),
            source,
        })?;
        // Renamed into place but not synced: a lease only matters while its holder runs,
        // and no sandbox outlives a power loss.
        write_replace(&path, &bytes, false)
    }

    /// Drops `holder`'s lease and deletes what only it was keeping: a fork's private image
    /// and its layers.
    pub fn release(&self, holder: &str) -> Result<(), ImageError> {
        let path = self.lease_path(holder)?;
        let lease = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<Lease>(&bytes).ok(),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(ImageError::io("read", &path)(err)),
        };
        if lease.as_ref().is_some_and(|l| !l.hidden) {
            // Nothing goes with an ordinary image's last user: dropping the lease is all.
            return match fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(err) => Err(ImageError::io("remove", &path)(err)),
            };
        }
        let _lock = self.lock()?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(ImageError::io("remove", &path)(err)),
        }
        let mut index = self.read_index()?;
        let Some(lease) = lease else {
            return Ok(());
        };
        let before = index.images.len();
        let leases = self.read_leases()?;
        let still_used = leases.values().any(|l| l.image == lease.image);
        index
            .images
            .retain(|i| !(i.hidden && i.reference == lease.image && !still_used));
        if index.images.len() != before {
            self.write_index(&index)?;
            self.collect_layers(&index, &leases)?;
        }
        Ok(())
    }

    /// Every holder's lease.
    pub fn leases(&self) -> Result<BTreeMap<String, Lease>, ImageError> {
        self.read_leases()
    }

    fn lease_path(&self, holder: &str) -> Result<PathBuf, ImageError> {
        let safe = !holder.is_empty()
            && holder
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && !holder.starts_with('.');
        if !safe {
            return Err(ImageError::InvalidReference {
                reference: holder.to_owned(),
                reason: "a lease holder is letters, digits, '-', '_' and '.'".into(),
            });
        }
        Ok(self.root.join("leases").join(format!("{holder}.json")))
    }

    fn read_leases(&self) -> Result<BTreeMap<String, Lease>, ImageError> {
        let dir = self.root.join("leases");
        let mut leases = BTreeMap::new();
        for entry in fs::read_dir(&dir).map_err(ImageError::io("list", &dir))? {
            let entry = entry.map_err(ImageError::io("list", &dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(holder) = name.strip_suffix(".json") else {
                continue;
            };
            // A lease that cannot be read still holds what it might name: keep everything
            // rather than guess.
            let bytes = fs::read(entry.path()).map_err(ImageError::io("read", entry.path()))?;
            let lease =
                serde_json::from_slice::<Lease>(&bytes).map_err(|source| ImageError::Index {
                    path: entry.path(),
                    source,
                })?;
            leases.insert(holder.to_owned(), lease);
        }
        Ok(leases)
    }

    /// Deletes layers that neither an image nor a lease names. Runs under the lock.
    fn collect_layers(
        &self,
        index: &Index,
        leases: &BTreeMap<String, Lease>,
    ) -> Result<PruneReport, ImageError> {
        let mut used: BTreeSet<&str> = BTreeSet::new();
        for image in &index.images {
            used.extend(image.layers.iter().map(String::as_str));
        }
        for lease in leases.values() {
            used.extend(lease.layers.iter().map(String::as_str));
        }
        let dir = self.root.join("layers");
        let mut report = PruneReport::default();
        for entry in fs::read_dir(&dir).map_err(ImageError::io("list", &dir))? {
            let entry = entry.map_err(ImageError::io("list", &dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if used.contains(name.as_str()) {
                continue;
            }
            let size = self.layer_meta(&name).map_or(0, |m| m.size_bytes);
            // Renamed first so a crash mid-delete never leaves a half layer under its id.
            let doomed = self.temp_path();
            fs::rename(entry.path(), &doomed).map_err(ImageError::io("move", entry.path()))?;
            remove_tree(&doomed);
            report.layers += 1;
            report.freed_bytes += size;
        }
        Ok(report)
    }

    /// Deletes blobs no image refers to (by id or manifest digest).
    fn collect_blobs(&self, index: &Index) {
        let used: BTreeSet<String> = index
            .images
            .iter()
            .flat_map(|i| [Some(i.id.clone()), i.digest.clone()])
            .flatten()
            .map(|d| d.trim_start_matches("sha256:").to_owned())
            .collect();
        let dir = self.root.join("blobs/sha256");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !used.contains(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Deletes temporary directories whose process is gone.
    fn collect_tmp(&self) {
        let dir = self.root.join("tmp");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name
                .split('-')
                .next()
                .and_then(|p| p.parse::<i32>().ok())
                .and_then(rustix::process::Pid::from_raw);
            let alive = pid.is_some_and(|pid| {
                rustix::process::test_kill_process(pid).is_ok() && pid != rustix::process::getpid()
            });
            if !alive {
                remove_tree(&entry.path());
            }
        }
    }

    pub(crate) fn layer_meta(&self, id: &str) -> Option<LayerMeta> {
        let path = self.root.join("layers").join(id).join("layer.json");
        let bytes = std::fs::read(path).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub(crate) fn has_layer(&self, id: &str) -> bool {
        self.root
            .join("layers")
            .join(id)
            .join("layer.json")
            .is_file()
    }

    /// A fresh path under `tmp/` for work in progress, named for this process so that
    /// [`ImageStore::prune`] can tell live work from leftovers.
    pub(crate) fn temp_path(&self) -> PathBuf {
        let mut nonce = [0u8; 8];
        rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())
            .unwrap_or_default();
        self.root
            .join("tmp")
            .join(format!("{}-{}", std::process::id(), hex(&nonce)))
    }

    /// A fresh directory under `tmp/` (for an upload on its way to [`ImageStore::import`]),
    /// removed when the guard drops unless it was moved away.
    pub fn temp_dir(&self) -> Result<TempDir, ImageError> {
        let path = self.temp_path();
        fs::create_dir(&path).map_err(ImageError::io("create", &path))?;
        Ok(TempDir(path))
    }

    /// Moves a complete layer (`dir` holds `root/`) into place as `meta.id`. A layer that
    /// appeared meanwhile (another pull of the same content) wins; `dir` is then discarded.
    pub(crate) fn install_layer(&self, dir: &TempDir, meta: &LayerMeta) -> Result<(), ImageError> {
        let meta_path = dir.path().join("layer.json");
        let bytes = serde_json::to_vec_pretty(meta).map_err(|source| ImageError::Index {
            path: meta_path.clone(),
            source,
        })?;
        write_atomic(&meta_path, &bytes)?;
        let _lock = self.lock()?;
        let target = self.root.join("layers").join(&meta.id);
        if self.has_layer(&meta.id) {
            return Ok(());
        }
        if target.exists() {
            // A directory without its `layer.json` is an interrupted install: replace it.
            remove_tree(&target);
        }
        fs::rename(dir.path(), &target).map_err(ImageError::io("install layer", &target))
    }

    /// Stores `bytes` as a blob named by `digest`.
    pub(crate) fn put_blob(&self, digest: &str, bytes: &[u8]) -> Result<(), ImageError> {
        let path = self.blob_path(digest);
        if path.is_file() {
            return Ok(());
        }
        write_atomic(&path, bytes)
    }

    fn lock(&self) -> Result<LockGuard, ImageError> {
        let path = self.root.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(ImageError::io("open", &path))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| ImageError::io("lock", &path)(e.into()))?;
        Ok(LockGuard(file))
    }

    fn read_index(&self) -> Result<Index, ImageError> {
        let path = self.root.join("index.json");
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| ImageError::Index {
                path: path.clone(),
                source,
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Index {
                version: INDEX_VERSION,
                images: Vec::new(),
            }),
            Err(err) => Err(ImageError::io("read", &path)(err)),
        }
    }

    fn write_index(&self, index: &Index) -> Result<(), ImageError> {
        let path = self.root.join("index.json");
        let index = Index {
            version: INDEX_VERSION,
            images: index.images.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&index).map_err(|source| ImageError::Index {
            path: path.clone(),
            source,
        })?;
        write_atomic(&path, &bytes)
    }
}

/// The image `name` designates: its full reference, or a prefix of its id (at least six hex
/// digits, unambiguous).
fn find_in<'a>(images: &'a [Image], name: &str) -> Option<&'a Image> {
    if let Ok(full) = reference::normalize(name)
        && let Some(image) = images.iter().find(|i| i.reference == full)
    {
        return Some(image);
    }
    if let Ok(parsed) = reference::parse(name)
        && let Some(digest) = parsed.digest()
    {
        let repo = format!("{}/{}", parsed.registry(), parsed.repository());
        if let Some(image) = images.iter().find(|i| {
            i.digest.as_deref() == Some(digest) && i.reference.starts_with(&format!("{repo}:"))
        }) {
            return Some(image);
        }
    }
    let hex = name.strip_prefix("sha256:").unwrap_or(name);
    if hex.len() >= 6 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        let mut matches = images
            .iter()
            .filter(|i| i.id.trim_start_matches("sha256:").starts_with(hex));
        let first = matches.next()?;
        if matches.all(|i| i.id == first.id) {
            return Some(first);
        }
    }
    None
}

/// Holds the store's lock until dropped.
struct LockGuard(
    #[expect(dead_code, reason = "held for its lock, released on drop")] std::fs::File,
);

/// A directory under the store's `tmp/`, removed on drop unless renamed away first.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.0.exists() {
            remove_tree(&self.0);
        }
    }
}

/// Removes a tree, first making its directories writable: layers keep the modes their images
/// give them, and a read-only directory would otherwise stop an unprivileged removal.
pub(crate) fn remove_tree(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() || !path.exists() {
        return;
    }
    open_up(path);
    if let Err(err) = std::fs::remove_dir_all(path) {
        tracing::warn!(path = %path.display(), error = %err, "cannot remove a directory of the image store");
    }
}

fn open_up(dir: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(
        dir,
        std::fs::Permissions::from_mode(meta.permissions().mode() | 0o700),
    );
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            open_up(&entry.path());
        }
    }
}

/// Writes `bytes` to `path` so that readers see the old content or the new, never a part,
/// and a crash leaves one of them: a temporary file beside it, fsync, rename, fsync of the
/// directory.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    write_replace(path, bytes, true)
}

/// Like [`write_atomic`]; with `durable` false, without the fsyncs (readers still never see
/// a part, but a power loss may lose the write).
fn write_replace(path: &Path, bytes: &[u8], durable: bool) -> Result<(), ImageError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if durable {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|err| {
        let _ = std::fs::remove_file(&tmp);
        ImageError::io("write", path)(err)
    })
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}
