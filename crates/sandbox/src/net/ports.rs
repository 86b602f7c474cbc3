//! Sandbox ports exposed on the host: a host listener per port, and for each connection a
//! fresh connection to the port on the sandbox's loopback that the init makes and hands
//! over (so the host never enters the sandbox's namespaces, with or without root).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, TcpStream};

use crate::client::Connection;
use crate::proto::{FrameError, RemoteError, Request, Response};

/// Asks a sandbox's init for a TCP socket on its loopback: a listener on `port`, or a
/// connection to it.
pub(crate) async fn sandbox_socket(
    control: &Path,
    port: u16,
    listen: bool,
) -> Result<Result<OwnedFd, RemoteError>, FrameError> {
    let mut connection = Connection::open(control).await?;
    match connection.call(&Request::Socket { port, listen }).await? {
        Response::Socket => Ok(Ok(connection.receive_fd().await?)),
        Response::Error(err) => Ok(Err(err)),
        _ => Err(FrameError::Unexpected { expected: "socket" }),
    }
}

/// Asks a sandbox's init for its network and user namespaces.
pub(crate) async fn sandbox_namespaces(
    control: &Path,
) -> Result<Result<(OwnedFd, OwnedFd), RemoteError>, FrameError> {
    let mut connection = Connection::open(control).await?;
    match connection.call(&Request::Namespaces).await? {
        Response::Namespaces => {
            let net = connection.receive_fd().await?;
            let user = connection.receive_fd().await?;
            Ok(Ok((net, user)))
        }
        Response::Error(err) => Ok(Err(err)),
        _ => Err(FrameError::Unexpected {
            expected: "namespaces",
        }),
    }
}

/// Turns a descriptor the init passed into a tokio stream.
pub(crate) fn stream(fd: OwnedFd) -> std::io::Result<TcpStream> {
    let stream = std::net::TcpStream::from(fd);
    stream.set_nonblocking(true)?;
    TcpStream::from_std(stream)
}

/// Forwards every connection to `listener` into the sandbox's `port`, until aborted.
pub(crate) fn spawn(
    listener: TcpListener,
    control: PathBuf,
    port: u16,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Ok((inbound, _)) = listener.accept().await else {
                // Out of descriptors, most likely: let some close before trying again.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let control = control.clone();
            tokio::spawn(async move {
                let Ok(Ok(fd)) = sandbox_socket(&control, port, false).await else {
                    // Nothing listens on the port (yet): the client sees the connection
                    // close, as it would have seen a refusal.
                    return;
                };
                let Ok(mut outbound) = stream(fd) else {
                    return;
                };
                let mut inbound = inbound;
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    })
}
