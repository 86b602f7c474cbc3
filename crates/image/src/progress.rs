//! Progress of long image work (pulls, imports, builds), reported as events that the CLI
//! draws as bars and the HTTP API streams as JSON lines.

use serde::Serialize;

/// One step of a pull, import or build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ProgressEvent {
    /// The manifest is known: how many layers and bytes there are to fetch.
    Resolved {
        reference: String,
        digest: String,
        layers: usize,
        bytes: u64,
    },
    /// A layer is already in the store.
    LayerCached { index: usize, digest: String },
    /// Bytes of a layer downloaded so far.
    Downloading {
        index: usize,
        digest: String,
        done: u64,
        total: u64,
    },
    /// A layer is being unpacked.
    Unpacking { index: usize, digest: String },
    /// A layer is in the store.
    LayerReady { index: usize, digest: String },
    /// A line of output from a tool (a Debian build's log).
    Log { line: String },
}

/// Receives progress events; called from any thread.
pub trait Progress: Send + Sync {
    fn event(&self, event: ProgressEvent);
}

/// Ignores progress.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn event(&self, _event: ProgressEvent) {}
}

impl<F: Fn(ProgressEvent) + Send + Sync> Progress for F {
    fn event(&self, event: ProgressEvent) {
        self(event);
    }
}
