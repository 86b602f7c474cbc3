//! Relaying bytes between two TCP sockets in the kernel: `splice(2)` from one socket into a
//! pipe and from the pipe into the other, one pipe per direction.
//!
//! A user-space relay copies every byte twice more than a direct connection (into its
//! buffer, out to the other socket); on a machine where the proxy, the sandbox and the
//! server share two cores, that halves a bulk download. With `splice` the pages move
//! between the sockets without passing through the proxy's memory.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Bytes moved so far in each direction; kept up to date while relaying, so that what a
/// connection moved is known however it ends.
#[derive(Debug, Default)]
pub(crate) struct Moved {
    pub(crate) forward: AtomicU64,
    pub(crate) backward: AtomicU64,
}

/// The two pipes of one relayed connection.
pub(crate) struct Splicer {
    forward: Pipe,
    backward: Pipe,
}

impl Splicer {
    /// Makes the pipes, asking for `capacity` bytes each. Fails only when the process is
    /// out of descriptors (the caller may then relay in user space).
    pub(crate) fn new(capacity: usize) -> io::Result<Self> {
        Ok(Self {
            forward: Pipe::new(capacity)?,
            backward: Pipe::new(capacity)?,
        })
    }

    /// Relays `a` → `b` and `b` → `a` until both directions have ended (each passes its
    /// end of stream on as a shutdown of the other socket's writing side), or until either
    /// fails.
    pub(crate) async fn relay(
        &self,
        a: &TcpStream,
        b: &TcpStream,
        moved: &Moved,
    ) -> io::Result<()> {
        tokio::try_join!(
            one_way(a, b, &self.forward, &moved.forward),
            one_way(b, a, &self.backward, &moved.backward),
        )?;
        Ok(())
    }
}

struct Pipe {
    read: rustix::fd::OwnedFd,
    write: rustix::fd::OwnedFd,
    capacity: usize,
}

impl Pipe {
    fn new(capacity: usize) -> io::Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        // A larger pipe moves more per system call; the default (64 KiB) is kept when the
        // user's pipe budget says no.
        let capacity = rustix::pipe::fcntl_setpipe_size(&write, capacity)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&write))?;
        Ok(Self {
            read,
            write,
            capacity,
        })
    }
}

/// Moves `from` → `to` through `pipe` until `from` ends, then shuts `to` for writing. The
/// pipe is emptied before it is filled again, so a `WouldBlock` always comes from the
/// socket being waited for.
async fn one_way(
    from: &TcpStream,
    to: &TcpStream,
    pipe: &Pipe,
    moved: &AtomicU64,
) -> io::Result<()> {
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    loop {
        let filled = from
            .async_io(Interest::READABLE, || {
                Ok(rustix::pipe::splice(
                    from,
                    None,
                    &pipe.write,
                    None,
                    pipe.capacity,
                    flags,
                )?)
            })
            .await?;
        if filled == 0 {
            break;
        }
        let mut left = filled;
        while left > 0 {
            let sent = to
                .async_io(Interest::WRITABLE, || {
                    Ok(rustix::pipe::splice(
                        &pipe.read, None, to, None, left, flags,
                    )?)
                })
                .await?;
            left -= sent;
            moved.fetch_add(sent as u64, Ordering::Relaxed);
        }
    }
    match rustix::net::shutdown(to, rustix::net::Shutdown::Write) {
        // The peer may already be gone; its reading side is then closed anyway.
        Ok(()) | Err(rustix::io::Errno::NOTCONN) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A connected pair of sockets on loopback.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (connected, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        (connected.unwrap(), accepted.unwrap().0)
    }

    #[tokio::test]
    async fn both_directions_arrive_whole_and_ends_of_stream_pass_through() {
        // client ⇄ (proxy_client | proxy_upstream) ⇄ server
        let (mut client, proxy_client) = pair().await;
        let (proxy_upstream, mut server) = pair().await;
        let moved = Moved::default();
        let up: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let down: Vec<u8> = (0..5_000_000u32).map(|i| (i % 241) as u8).collect();
        let splicer = Splicer::new(256 << 10).unwrap();
        let relay = splicer.relay(&proxy_client, &proxy_upstream, &moved);
        let client_side = async {
            client.write_all(&up).await.unwrap();
            client.shutdown().await.unwrap();
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        };
        let server_side = async {
            let mut got = Vec::new();
            server.read_to_end(&mut got).await.unwrap();
            server.write_all(&down).await.unwrap();
            server.shutdown().await.unwrap();
            got
        };
        let (relayed, at_client, at_server) = tokio::join!(relay, client_side, server_side);
        relayed.unwrap();
        assert_eq!(
            (
                at_server == up,
                at_client == down,
                moved.forward.load(Ordering::Relaxed),
                moved.backward.load(Ordering::Relaxed)
            ),
            (true, true, up.len() as u64, down.len() as u64)
        );
    }
}
