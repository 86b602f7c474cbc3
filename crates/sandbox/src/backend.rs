//! The seam every sandbox client programs against: [`Backend`], implemented by the Linux
//! jail ([`crate::JailBackend`]) today and by microVM or Kubernetes backends later.

use async_trait::async_trait;
use forge_types::{
    Connection, ExecEvent, ExecRequest, ExecResult, FileInfo, ImageInfo, PortForward, ProcessId,
    ProcessInfo, ProcessOutput, ProcessSpec, PtySize, SandboxId, SandboxInfo, SandboxSpec,
    SandboxStats, SpecError,
};
use futures::stream::BoxStream;

use crate::proto::{ErrorKind, RemoteError};

/// Output of a streamed exec or attach, ending with [`ExecEvent::Exit`].
pub type ExecStream = BoxStream<'static, Result<ExecEvent, SandboxError>>;

/// Everything that can go wrong between a client and a sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    InvalidSpec(#[from] SpecError),
    /// The image store refused: an unknown image, a bad name, a failed pull.
    #[error(transparent)]
    Image(#[from] forge_image::ImageError),
    /// The image is not in the store and its registry cannot be reached.
    #[error(
        "image {image} is not in the store and cannot be pulled ({reason}); load it with `forge image import FILE`, pull it where a registry is reachable, or use the image \"host\""
    )]
    ImageUnavailable { image: String, reason: String },
    #[error("{feature} is not supported by this backend yet")]
    Unsupported { feature: String },
    #[error("sandbox {id} not found")]
    NotFound { id: SandboxId },
    /// The sandbox's init is dead (killed, out of memory): the sandbox cannot serve requests
    /// any more and should be destroyed.
    #[error("sandbox {id} is gone: {reason}")]
    Gone { id: SandboxId, reason: String },
    /// The sandbox refused or failed an operation (a missing file, a bad path).
    #[error("sandbox {id}: {source}")]
    Operation {
        id: SandboxId,
        #[source]
        source: RemoteError,
    },
    #[error("cannot create sandbox: {stage}")]
    Setup {
        stage: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the sandbox host cannot run sandboxes: {reason}")]
    Host { reason: String },
    /// A command that prepares a sandbox (a template's setup) failed.
    #[error("setup command {command:?} failed: {reason}")]
    SetupCommand { command: String, reason: String },
    /// The host has no room for another sandbox right now.
    #[error("no capacity for another sandbox: {reason}")]
    Capacity { reason: String },
    #[error("sandbox {id}: protocol error")]
    Protocol {
        id: SandboxId,
        #[source]
        source: crate::proto::FrameError,
    },
    #[error("cannot destroy sandbox {id}: {stage}")]
    Teardown {
        id: SandboxId,
        stage: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SandboxError {
    /// The remote error's class, when the sandbox itself refused the operation.
    pub fn remote_kind(&self) -> Option<ErrorKind> {
        match self {
            Self::Operation { source, .. } => Some(source.kind),
            _ => None,
        }
    }

    pub(crate) fn setup(
        stage: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Setup {
            stage: stage.into(),
            source: source.into(),
        }
    }
}

/// A place where sandboxes live. All methods address a sandbox by id; ids of destroyed
/// sandboxes answer [`SandboxError::NotFound`].
#[async_trait]
pub trait Backend: std::fmt::Debug + Send + Sync + 'static {
    /// A short name for listings (`jail`).
    fn name(&self) -> &'static str;

    /// The image store the backend builds root file systems from, if it has one.
    fn images(&self) -> Option<std::sync::Arc<forge_image::ImageStore>> {
        None
    }

    async fn create(&self, spec: SandboxSpec) -> Result<SandboxInfo, SandboxError>;
    async fn destroy(&self, id: &SandboxId) -> Result<(), SandboxError>;
    async fn get(&self, id: &SandboxId) -> Result<SandboxInfo, SandboxError>;
    async fn list(&self) -> Vec<SandboxInfo>;
    async fn stats(&self, id: &SandboxId) -> Result<SandboxStats, SandboxError>;

    async fn exec(&self, id: &SandboxId, request: ExecRequest) -> Result<ExecResult, SandboxError>;
    /// Runs a command and streams its output; dropping the stream kills the command.
    async fn exec_stream(
        &self,
        id: &SandboxId,
        request: ExecRequest,
    ) -> Result<ExecStream, SandboxError>;

    async fn spawn(&self, id: &SandboxId, spec: ProcessSpec) -> Result<ProcessInfo, SandboxError>;
    async fn processes(&self, id: &SandboxId) -> Result<Vec<ProcessInfo>, SandboxError>;
    async fn signal(
        &self,
        id: &SandboxId,
        process: ProcessId,
        signal: i32,
    ) -> Result<(), SandboxError>;
    async fn write_stdin(
        &self,
        id: &SandboxId,
        process: ProcessId,
        data: Vec<u8>,
        close: bool,
    ) -> Result<(), SandboxError>;
    async fn read_output(
        &self,
        id: &SandboxId,
        process: ProcessId,
        cursor: u64,
        max_bytes: u64,
        wait_ms: u64,
    ) -> Result<ProcessOutput, SandboxError>;
    /// Streams a process's output from `cursor` until it exits.
    async fn attach(
        &self,
        id: &SandboxId,
        process: ProcessId,
        cursor: u64,
    ) -> Result<ExecStream, SandboxError>;
    async fn wait(
        &self,
        id: &SandboxId,
        process: ProcessId,
        timeout_ms: Option<u64>,
    ) -> Result<ProcessInfo, SandboxError>;
    async fn resize(
        &self,
        id: &SandboxId,
        process: ProcessId,
        size: PtySize,
    ) -> Result<(), SandboxError>;

    async fn read_file(&self, id: &SandboxId, path: &str) -> Result<Vec<u8>, SandboxError>;
    async fn write_file(
        &self,
        id: &SandboxId,
        path: &str,
        data: Vec<u8>,
        mode: Option<u32>,
    ) -> Result<(), SandboxError>;
    async fn list_dir(&self, id: &SandboxId, path: &str) -> Result<Vec<FileInfo>, SandboxError>;
    async fn stat(&self, id: &SandboxId, path: &str) -> Result<FileInfo, SandboxError>;
    async fn mkdir(&self, id: &SandboxId, path: &str) -> Result<(), SandboxError>;
    async fn rename(&self, id: &SandboxId, from: &str, to: &str) -> Result<(), SandboxError>;
    async fn chmod(&self, id: &SandboxId, path: &str, mode: u32) -> Result<(), SandboxError>;
    async fn remove(&self, id: &SandboxId, path: &str, recursive: bool)
    -> Result<(), SandboxError>;
    async fn glob(&self, id: &SandboxId, pattern: &str) -> Result<Vec<String>, SandboxError>;

    /// Saves the sandbox's file system (its image and everything written since) as the
    /// image `name`. The sandbox keeps running.
    async fn snapshot(&self, id: &SandboxId, name: &str) -> Result<ImageInfo, SandboxError>;
    /// A new sandbox with the same spec whose file system starts as a copy-on-write copy of
    /// the sandbox's current one; later writes on either side are invisible to the other.
    async fn fork(&self, id: &SandboxId) -> Result<SandboxInfo, SandboxError>;

    /// Every egress connection attempt of the backend's sandboxes from now on, allowed or
    /// refused; `None` when the backend records none.
    fn connection_log(&self) -> Option<tokio::sync::broadcast::Receiver<Connection>> {
        None
    }

    /// Makes the sandbox's `port` (on its loopback) reachable at `host` on the host
    /// (port 0 picks a free one).
    async fn expose_port(
        &self,
        id: &SandboxId,
        port: u16,
        host: std::net::SocketAddr,
    ) -> Result<PortForward, SandboxError> {
        let _ = (id, port, host);
        Err(SandboxError::Unsupported {
            feature: "exposing ports".into(),
        })
    }

    /// The sandbox's exposed ports.
    async fn ports(&self, id: &SandboxId) -> Result<Vec<PortForward>, SandboxError> {
        let _ = id;
        Ok(Vec::new())
    }

    /// Stops exposing a port; connections already made keep running.
    async fn unexpose_port(&self, id: &SandboxId, port: u16) -> Result<(), SandboxError> {
        let _ = (id, port);
        Err(SandboxError::Unsupported {
            feature: "exposing ports".into(),
        })
    }
}
