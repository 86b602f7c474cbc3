//! The host's side of the init protocol: connections to one sandbox's control socket.
//!
//! Requests that complete with one answer reuse idle connections; streams (exec output,
//! attach) own a connection until they end, and dropping one closes it, which the agent
//! takes as the client going away.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::proto::{self, FrameError, PROTOCOL_VERSION, Request, Response};

/// Idle connections kept per sandbox.
const MAX_IDLE: usize = 8;

/// One connection to an agent, past the hello.
#[derive(Debug)]
pub(crate) struct Connection {
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
}

impl Connection {
    pub(crate) async fn open(path: &Path) -> Result<Self, FrameError> {
        let stream = UnixStream::connect(path).await?;
        let (reader, writer) = stream.into_split();
        let mut connection = Self { reader, writer };
        match connection
            .call(&Request::Hello {
                version: PROTOCOL_VERSION,
            })
            .await?
        {
            Response::Hello { .. } => Ok(connection),
            _ => Err(FrameError::Closed),
        }
    }

    /// A connection whose handshake is implied (the init's first one).
    pub(crate) fn established(stream: UnixStream) -> Self {
        let (reader, writer) = stream.into_split();
        Self { reader, writer }
    }

    pub(crate) async fn send(&mut self, request: &Request) -> Result<(), FrameError> {
        proto::write_frame(&mut self.writer, request).await
    }

    pub(crate) async fn receive(&mut self) -> Result<Response, FrameError> {
        proto::read_frame(&mut self.reader)
            .await?
            .ok_or(FrameError::Closed)
    }

    pub(crate) async fn call(&mut self, request: &Request) -> Result<Response, FrameError> {
        self.send(request).await?;
        self.receive().await
    }

    /// The descriptor that follows a [`Response::Socket`].
    pub(crate) async fn receive_fd(&mut self) -> Result<std::os::fd::OwnedFd, FrameError> {
        Ok(proto::receive_fd(self.reader.as_ref()).await?)
    }
}

/// The connections of one sandbox.
#[derive(Debug)]
pub(crate) struct AgentClient {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl AgentClient {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// A new connection, for a stream that will own it.
    pub(crate) async fn connection(&self) -> Result<Connection, FrameError> {
        Connection::open(&self.path).await
    }

    fn idle(&self) -> Option<Connection> {
        self.idle.lock().map_or(None, |mut idle| idle.pop())
    }

    /// Returns a connection whose exchange completed cleanly.
    pub(crate) fn release(&self, connection: Connection) {
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE
        {
            idle.push(connection);
        }
    }

    /// One request, one answer.
    pub(crate) async fn call(&self, request: &Request) -> Result<Response, FrameError> {
        if let Some(mut connection) = self.idle() {
            match connection.call(request).await {
                Ok(response) => {
                    self.release(connection);
                    return Ok(response);
                }
                // An idle connection may have been closed under us (the agent never does so
                // while it lives); fall through to a fresh one, which tells the truth.
                Err(FrameError::Closed | FrameError::Io(_)) => {}
                Err(err) => return Err(err),
            }
        }
        let mut connection = Connection::open(&self.path).await?;
        let response = connection.call(request).await?;
        self.release(connection);
        Ok(response)
    }

    /// Drops every idle connection (the sandbox is going away).
    pub(crate) fn close(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }
}
