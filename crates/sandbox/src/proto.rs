//! The init agent's wire protocol: length-prefixed MessagePack frames on a stream socket.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of a MessagePack map
//! (named fields, so either side may add optional fields without breaking the other). Each
//! connection opens with a [`Request::Hello`] carrying [`PROTOCOL_VERSION`]; the agent
//! answers with its own version or an error and closes. After that a connection carries one
//! request at a time; a request may be followed by more frames from the client
//! ([`Request::Chunk`] … [`Request::End`] for uploads) and answered by several frames from the
//! agent (streamed output, then a final frame). The same protocol is meant to run over vsock
//! to a guest agent in a microVM backend.

use std::io::{self, Read, Write};

use forge_types::{
    ExecRequest, ExecResult, FileInfo, ProcessId, ProcessInfo, ProcessOutput, ProcessSpec, PtySize,
    StreamKind,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Bumped whenever a change would make an older peer misread a frame.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest frame either side accepts. File contents travel in chunks well below this.
pub const MAX_FRAME: usize = 8 << 20;

/// Size of the chunks file contents and streamed output are cut into.
pub const CHUNK: usize = 1 << 20;

/// What a client asks of the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Request {
    Hello {
        version: u32,
    },
    Ping,
    /// Runs a command to completion. With `stream`, output arrives as
    /// [`Response::Output`] frames before the final [`Response::Exec`].
    Exec {
        request: ExecRequest,
        stream: bool,
    },
    Spawn {
        spec: ProcessSpec,
    },
    ListProcesses,
    Signal {
        id: ProcessId,
        signal: i32,
    },
    WriteStdin {
        id: ProcessId,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
        close: bool,
    },
    /// Output from `cursor`, waiting up to `wait_ms` for some if there is none yet.
    ReadOutput {
        id: ProcessId,
        cursor: u64,
        max_bytes: u64,
        wait_ms: u64,
    },
    /// Streams output from `cursor` as it is produced until the process exits.
    Attach {
        id: ProcessId,
        cursor: u64,
    },
    Wait {
        id: ProcessId,
        timeout_ms: Option<u64>,
    },
    Resize {
        id: ProcessId,
        size: PtySize,
    },
    ReadFile {
        path: String,
        offset: u64,
        limit: Option<u64>,
    },
    /// Followed by [`Request::Chunk`] frames and one [`Request::End`].
    WriteFile {
        path: String,
        mode: Option<u32>,
        append: bool,
    },
    Chunk {
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    End,
    ListDir {
        path: String,
    },
    Stat {
        path: String,
    },
    Mkdir {
        path: String,
        mode: Option<u32>,
    },
    Rename {
        from: String,
        to: String,
    },
    Chmod {
        path: String,
        mode: u32,
    },
    Remove {
        path: String,
        recursive: bool,
    },
    Glob {
        pattern: String,
    },
    /// A TCP socket made in the sandbox's network namespace, for the host to use: a listener
    /// on `127.0.0.1:port` (`listen`), or a connection to it. Answered by
    /// [`Response::Socket`] and then one byte carrying the descriptor ([`send_fd`]).
    Socket {
        port: u16,
        listen: bool,
    },
    /// The sandbox's network and user namespaces, for tools the host attaches to them
    /// (`pasta`): answered by [`Response::Namespaces`] and then two bytes carrying them,
    /// network first. The init is not dumpable, so the host cannot open them by pid
    /// without root.
    Namespaces,
}

/// What the agent answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Response {
    Hello {
        version: u32,
        pid: i32,
    },
    /// The first frame on the connection the init is born with: setup succeeded, with
    /// notes on protections this host could not provide.
    Ready {
        version: u32,
        notes: Vec<String>,
    },
    Pong,
    Ok,
    Error(RemoteError),
    Output {
        stream: StreamKind,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    Exec(ExecResult),
    Process(ProcessInfo),
    Processes {
        processes: Vec<ProcessInfo>,
    },
    ProcessOutput(ProcessOutput),
    Data {
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    Files {
        files: Vec<FileInfo>,
    },
    Stat(FileInfo),
    Paths {
        paths: Vec<String>,
    },
    /// The socket asked for follows as one byte carrying it.
    Socket,
    /// The namespaces follow, one byte carrying each.
    Namespaces,
}

/// An operation the agent refused or could not complete, classified so the host can map it
/// to a status without reading the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct RemoteError {
    pub kind: ErrorKind,
    pub message: String,
}

impl RemoteError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// Classes of failure inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    NotFound,
    AlreadyExists,
    PermissionDenied,
    NotADirectory,
    IsADirectory,
    DirectoryNotEmpty,
    InvalidInput,
    NoSuchProcess,
    Unsupported,
    Protocol,
    Other,
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("i/o on the control socket")]
    Io(#[from] io::Error),
    #[error("undecodable frame")]
    Decode(#[from] rmp_serde::decode::Error),
    #[error("unencodable frame")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("unexpected answer: expected {expected}")]
    Unexpected { expected: &'static str },
}

/// Encodes one message as a frame (length prefix included).
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    let mut buf = vec![0u8; 4];
    rmp_serde::encode::write_named(&mut buf, message)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    let len = u32::try_from(len).map_err(|_| FrameError::TooLarge(len))?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

fn frame_len(header: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    Ok(len)
}

/// Reads one frame; `Ok(None)` at a clean end of stream between frames.
pub async fn read_frame<R, T>(reader: &mut R) -> Result<Option<T>, FrameError>
where
    R: AsyncRead + Unpin,
    T: for<'de> Deserialize<'de>,
{
    let mut header = [0u8; 4];
    match reader.read_exact(&mut header).await {
        Ok(_) => {}
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err.into()),
    }
    let mut body = vec![0u8; frame_len(header)?];
    reader.read_exact(&mut body).await.map_err(|err| {
        if err.kind() == io::ErrorKind::UnexpectedEof {
            FrameError::Closed
        } else {
            err.into()
        }
    })?;
    Ok(Some(rmp_serde::from_slice(&body)?))
}

/// Writes one frame.
pub async fn write_frame<W, T>(writer: &mut W, message: &T) -> Result<(), FrameError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    writer.write_all(&encode(message)?).await?;
    Ok(())
}

/// Sends a descriptor after a frame: one byte with `SCM_RIGHTS` ancillary data.
pub async fn send_fd(
    stream: &tokio::net::UnixStream,
    fd: std::os::fd::BorrowedFd<'_>,
) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    loop {
        stream.writable().await?;
        let fds = [fd];
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        control.push(SendAncillaryMessage::ScmRights(&fds));
        let sent = stream.try_io(tokio::io::Interest::WRITABLE, || {
            rustix::net::sendmsg(
                stream,
                &[io::IoSlice::new(&[0])],
                &mut control,
                SendFlags::NOSIGNAL,
            )
            .map_err(io::Error::from)
        });
        match sent {
            Ok(_) => return Ok(()),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
}

/// Receives the descriptor [`send_fd`] sent.
pub async fn receive_fd(stream: &tokio::net::UnixStream) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    loop {
        stream.readable().await?;
        let mut byte = [0u8; 1];
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = stream.try_io(tokio::io::Interest::READABLE, || {
            rustix::net::recvmsg(
                stream,
                &mut [io::IoSliceMut::new(&mut byte)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )
            .map_err(io::Error::from)
        });
        match received {
            Ok(received) if received.bytes == 0 => {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            Ok(_) => {
                return control
                    .drain()
                    .find_map(|message| match message {
                        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
                        _ => None,
                    })
                    .ok_or_else(|| io::Error::other("no descriptor came with the socket"));
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
}

/// Blocking twin of [`read_frame`], for the helper process that runs no async runtime.
pub fn read_frame_blocking<R, T>(reader: &mut R) -> Result<Option<T>, FrameError>
where
    R: Read,
    T: for<'de> Deserialize<'de>,
{
    let mut header = [0u8; 4];
    match reader.read_exact(&mut header) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err.into()),
    }
    let mut body = vec![0u8; frame_len(header)?];
    reader.read_exact(&mut body)?;
    Ok(Some(rmp_serde::from_slice(&body)?))
}

/// Blocking twin of [`write_frame`].
pub fn write_frame_blocking<W: Write, T: Serialize>(
    writer: &mut W,
    message: &T,
) -> Result<(), FrameError> {
    writer.write_all(&encode(message)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[tokio::test]
    async fn frames_round_trip_with_binary_payloads() {
        let messages = vec![
            Request::Hello {
                version: PROTOCOL_VERSION,
            },
            Request::Exec {
                request: ExecRequest::argv(["cat"]).with_stdin(vec![0, 159, 146, 150, 255]),
                stream: true,
            },
            Request::Chunk {
                data: (0..=255).collect(),
            },
            Request::End,
        ];
        let mut wire = Vec::new();
        for message in &messages {
            write_frame(&mut wire, message).await.unwrap();
        }
        let mut reader = wire.as_slice();
        let mut decoded = Vec::new();
        while let Some(message) = read_frame::<_, Request>(&mut reader).await.unwrap() {
            decoded.push(message);
        }
        assert_eq!(decoded, messages);
    }

    #[test]
    fn oversized_and_truncated_frames_are_errors() {
        let mut huge = (u32::try_from(MAX_FRAME).unwrap() + 1)
            .to_be_bytes()
            .to_vec();
        huge.extend_from_slice(b"junk");
        let err = read_frame_blocking::<_, Request>(&mut huge.as_slice()).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge(_)), "{err:?}");

        let mut frame = encode(&Request::Ping).unwrap();
        frame.truncate(frame.len() - 1);
        let err = read_frame_blocking::<_, Request>(&mut frame.as_slice()).unwrap_err();
        assert!(matches!(err, FrameError::Io(_)), "{err:?}");

        let garbage = [0, 0, 0, 3, 0xc1, 0xc1, 0xc1];
        let err = read_frame_blocking::<_, Request>(&mut garbage.as_slice()).unwrap_err();
        assert!(matches!(err, FrameError::Decode(_)), "{err:?}");
    }
}
