//! The complete recipe for one sandbox, computed on the host and carried out by the helper
//! and the sandbox's init. Plain data, so it can cross the helper socket.

use std::collections::BTreeMap;
use std::path::PathBuf;

use forge_types::Limits;

use serde::{Deserialize, Serialize};

/// An overlay mount: read-only lower layers (top first) and a writable upper layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Overlay {
    pub(crate) lower: Vec<Lower>,
    pub(crate) upper: PathBuf,
    pub(crate) work: PathBuf,
    /// The directory holding the image store's layers, when they keep their images' owners
    /// (unpacked as root). The helper hands the sandbox one idmapped mount of it, so that
    /// the layers' root-owned files are the sandbox root's, whatever the number of layers.
    pub(crate) idmapped: Option<PathBuf>,
}

/// One read-only layer of an overlay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Lower {
    pub(crate) path: PathBuf,
    /// The layer lies below [`Overlay::idmapped`] and is read through its idmapped mount.
    pub(crate) idmap: bool,
}

/// A host directory mounted read-only inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReadOnlyBind {
    pub(crate) source: PathBuf,
    /// Absolute path inside the sandbox.
    pub(crate) target: String,
}

/// One line of a uid or gid map: `count` ids from `inside` map to `outside` on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IdRange {
    pub(crate) inside: u32,
    pub(crate) outside: u32,
    pub(crate) count: u32,
}

impl IdRange {
    pub(crate) fn map_line(&self) -> String {
        format!("{} {} {}\n", self.inside, self.outside, self.count)
    }
}

/// Everything the helper and the init need to build a sandbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SpawnPlan {
    pub(crate) id: String,
    /// The sandbox's host directory (upper layers, control socket).
    pub(crate) sandbox_dir: PathBuf,
    /// Empty directory where the new root is assembled.
    pub(crate) root_dir: PathBuf,
    pub(crate) socket_path: PathBuf,
    pub(crate) root: Overlay,
    pub(crate) binds: Vec<ReadOnlyBind>,
    /// A prepared `/dev` to mount read-only, when the host could make one.
    pub(crate) dev_template: Option<PathBuf>,
    /// Host directory mounted at `/workspace`.
    pub(crate) workspace: Option<PathBuf>,
    pub(crate) uid_map: IdRange,
    pub(crate) gid_map: IdRange,
    /// True when Forge runs without root: only the caller's own ids can be mapped and
    /// `setgroups` must be denied first.
    pub(crate) unprivileged: bool,
    /// Owner of the sandbox's directory (the host uid its root maps to), when not the
    /// caller's own.
    pub(crate) owner: Option<u32>,
    /// The sandbox's cgroups, which the helper creates and puts the init in.
    pub(crate) cgroup: Option<crate::cgroup::SandboxCgroup>,
    pub(crate) hostname: String,
    pub(crate) limits: Limits,
    /// Environment every process starts with (before request-level additions).
    pub(crate) env: BTreeMap<String, String>,
    /// Paths inside the sandbox that processes may write to (Landlock).
    pub(crate) writable: Vec<String>,
    /// The whole root is the sandbox's own (an image, not the host's directories): every
    /// top-level directory but `/proc`, `/sys` and `/dev` is writable too.
    pub(crate) writable_root: bool,
    /// The sandbox never administers its own network (mode none or allowlist): the helper
    /// may hand it a network namespace made ahead of time, with loopback up, that belongs
    /// to the host's user namespace, so that not even the sandbox's root can change it.
    pub(crate) prepared_network: bool,
}
