//! Forge's shared vocabulary: sandbox specs, exec requests and results, processes, files,
//! images, gateway tools.
//!
//! This crate is layer 0: plain data with serde, parsing and validation that needs no I/O.
//! Every other crate speaks these types, so they stay free of tokio, sockets and the file
//! system. Wire formats that clients see (ForgeVM's JSON, the init protocol) are built from
//! these types but may rename fields at their own edge.

pub mod exec;
pub mod fs;
pub mod image;
pub mod net;
pub mod process;
pub mod sandbox;
pub mod tool;
pub mod units;

pub use exec::{Command, ExecEvent, ExecRequest, ExecResult, StreamKind};
pub use fs::{FileInfo, FileKind};
pub use image::{ImageInfo, ImageSource, PruneReport};
pub use net::{Connection, ConnectionKind, PortForward, Verdict};
pub use process::{
    OutputChunk, ProcessId, ProcessInfo, ProcessOutput, ProcessSpec, ProcessState, PtySize,
};
pub use sandbox::{
    Limits, NetworkMode, SandboxId, SandboxInfo, SandboxSpec, SandboxStats, SpecError,
};
pub use tool::{SessionId, ToolSpec};
