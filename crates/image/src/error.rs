//! What can go wrong in the image store, each variant naming the image, layer or path.

use std::io;
use std::path::PathBuf;

/// An image store failure.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("invalid image reference {reference:?}: {reason}")]
    InvalidReference { reference: String, reason: String },

    #[error(
        "image {name} is not in the store; fetch it with `forge image pull {name}` or load an archive with `forge image import FILE`"
    )]
    NotFound { name: String },

    #[error("image {name} is in use by {holders}; destroy those first or pass --force")]
    InUse { name: String, holders: String },

    #[error("cannot reach registry {registry} for {reference}: {reason}")]
    Unreachable {
        reference: String,
        registry: String,
        reason: String,
    },

    #[error("registry {registry} refused {reference}: {reason}")]
    Registry {
        reference: String,
        registry: String,
        reason: String,
    },

    #[error("{what} of {reference} does not match its digest: expected {expected}, got {actual}")]
    DigestMismatch {
        reference: String,
        what: String,
        expected: String,
        actual: String,
    },

    #[error("{reference} has no image for {platform} (it has: {available})")]
    NoPlatform {
        reference: String,
        platform: String,
        available: String,
    },

    #[error("{reference}: unsupported {what}: {detail}")]
    Unsupported {
        reference: String,
        what: &'static str,
        detail: String,
    },

    #[error("cannot import {path}: {reason}")]
    Archive { path: PathBuf, reason: String },

    #[error("layer {layer}: {reason}")]
    Layer {
        layer: String,
        reason: String,
        #[source]
        source: Option<io::Error>,
    },

    #[error("debian build failed: {reason}")]
    Build { reason: String },

    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("image store index {path} is unreadable")]
    Index {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl ImageError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { op, path, source }
    }

    pub(crate) fn layer(layer: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Layer {
            layer: layer.into(),
            reason: reason.into(),
            source: None,
        }
    }

    /// Whether the failure is the network's (so another mirror, or later, may work) rather
    /// than the image's.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }

    /// Whether the failure means the image does not exist where it was looked for.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}
