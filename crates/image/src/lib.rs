//! Forge's image store: the read-only layers sandboxes' root file systems are stacked from.
//!
//! Images come from four places: the built-in `host` base (the host's own system
//! directories, so a fresh offline machine can start sandboxes at once), OCI registries
//! ([`ImageStore::pull`]), OCI layouts and `docker save` archives ([`ImageStore::import`]),
//! and Debian package mirrors ([`ImageStore::build_debian`]). Sandboxes add a fifth: their
//! own writable layer, committed as a snapshot or a fork ([`ImageStore::commit`]).
//!
//! Each layer is unpacked once into a directory in overlayfs's own format and shared
//! read-only by every sandbox that uses it. Leases record which sandboxes and templates use
//! which layers, and garbage collection ([`ImageStore::prune`]) never deletes a leased layer.
//!
//! The store is a directory with a JSON index, safe to share between processes (a server
//! and the CLI) through a file lock; see [`store`] for the layout.

mod archive;
mod commit;
mod debian;
mod error;
mod oci;
mod progress;
pub mod reference;
mod registry;
pub mod store;
mod unpack;

pub use commit::{Commit, IdShift};
pub use debian::{DebianBuild, VARIANTS};
pub use error::ImageError;
pub use progress::{NoProgress, Progress, ProgressEvent};
pub use registry::{Credentials, RegistryConfig};
pub use store::{Base, Image, ImageStore, Lease, RunConfig, TempDir};

/// The name of the built-in base assembled from the host's system directories.
pub const HOST_IMAGE: &str = forge_types::sandbox::HOST_IMAGE;

/// Makes `ring` the process's TLS provider. The HTTP client is built without a built-in
/// provider (to avoid a second, C-based crypto library), and that choice applies to every
/// HTTP client in the process, so a binary calls this once at start, before it builds any.
/// Later calls do nothing.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
