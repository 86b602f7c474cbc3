//! Forge's sandbox engine.
//!
//! [`Backend`] is the seam every client of sandboxes (the server, the tool gateway, the
//! orchestrator) programs against; [`JailBackend`] implements it with Linux namespaces,
//! an overlay root, cgroups, seccomp and Landlock, run by Forge's own init inside each
//! sandbox. [`Pool`] keeps warm sandboxes so acquiring one is a hand-off.
//!
//! A binary that uses the jail backend must call [`run_if_helper`] first thing in `main`:
//! the backend re-executes that binary as its helper process.

mod backend;
pub mod cgroup;
mod client;
mod helper;
pub mod host;
mod image;
mod init;
mod jail;
mod layout;
pub mod net;
mod plan;
mod pool;
pub mod proto;
pub mod seccomp;
mod sys;

pub use backend::{Backend, ExecStream, SandboxError};
pub use helper::{HELPER_ARG, HelperCommand, run_if_helper};
pub use jail::{CGROUPS_FILE, JailBackend, JailConfig, Recovery, WRITABLE_PATHS};
pub use pool::{Pool, PoolStatus};
