//! What the image store holds ([`ImageInfo`]) and where each image came from
//! ([`ImageSource`]), as listings, the HTTP API and the CLI show them.

use serde::{Deserialize, Serialize};

/// One image: a stack of read-only layers and the settings processes start with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// The name as people write it: `alpine:latest`, `ghcr.io/org/tool:1`, `host`.
    pub name: String,
    /// The fully qualified reference: `docker.io/library/alpine:latest`.
    pub reference: String,
    /// Content id: the digest of the image's configuration (`sha256:…`).
    pub id: String,
    /// Digest of the manifest it was pulled by, when it came from a registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Number of layers, the host base not counted.
    pub layers: usize,
    /// Bytes of file content in its layers.
    pub size_bytes: u64,
    /// RFC 3339 time the image entered the store.
    pub created_at: String,
    pub source: ImageSource,
    /// The image this one was made from (snapshots and template layers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// Where an image came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageSource {
    /// The base assembled from the host's own system directories.
    Host,
    /// Pulled from an OCI registry (possibly through a mirror, named here).
    Registry { registry: String },
    /// Imported from an OCI layout or a `docker save` archive.
    Archive { path: String, format: String },
    /// Built from Debian packages with `mmdebstrap`.
    Debian {
        suite: String,
        packages: Vec<String>,
    },
    /// A sandbox's writable layer on top of its image.
    Snapshot { sandbox: String },
    /// A template's setup commands run once on top of its image.
    Template { template: String },
}

impl ImageSource {
    /// A one-word description for tables.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Registry { .. } => "registry",
            Self::Archive { .. } => "archive",
            Self::Debian { .. } => "debian",
            Self::Snapshot { .. } => "snapshot",
            Self::Template { .. } => "template",
        }
    }
}

/// What removing images or pruning the store freed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneReport {
    /// Names of the images removed.
    pub images: Vec<String>,
    /// Layers deleted from disk.
    pub layers: usize,
    /// Bytes of file content freed.
    pub freed_bytes: u64,
}
