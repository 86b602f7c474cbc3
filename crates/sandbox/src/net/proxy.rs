//! The egress proxy of one allowlist sandbox: HTTP/1.1 requests with absolute URIs and
//! `CONNECT` tunnels, each checked against the sandbox's [`Allowlist`], resolved by the
//! proxy itself, connected to exactly the address it checked, and logged as a
//! [`Connection`] whether allowed or refused.
//!
//! Refusals answer with a status and a one-line reason starting with `forge:`, so what a
//! tool prints tells the agent why.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use forge_types::{Connection, ConnectionKind, SandboxId, Verdict};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

use super::splice::{Moved, Splicer};
use super::tls::{self, Hello};
use super::{Allowlist, Resolver};

/// Largest request head the proxy reads.
const MAX_HEAD: usize = 64 << 10;

/// Pipe (or, without descriptors for pipes, buffer) per direction when relaying; large ones
/// keep bulk downloads near the speed of a direct connection.
const RELAY_BUFFER: usize = 256 << 10;

/// Connections one sandbox may hold open through its proxy at once, so that a sandbox
/// cannot exhaust the host's descriptors.
const MAX_CONNECTIONS: usize = 512;

/// What a sandbox's proxy needs to judge and log its connections.
#[derive(Debug)]
pub(crate) struct ProxyContext {
    pub(crate) sandbox: SandboxId,
    pub(crate) allowlist: Allowlist,
    pub(crate) resolver: Resolver,
    pub(crate) log: broadcast::Sender<Connection>,
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
}

impl ProxyContext {
    pub(crate) fn new(
        sandbox: SandboxId,
        allowlist: Allowlist,
        resolver: Resolver,
        log: broadcast::Sender<Connection>,
    ) -> Self {
        Self {
            sandbox,
            allowlist,
            resolver,
            log,
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
        }
    }
}

/// Accepts connections on the listener the sandbox's init made, until aborted.
pub(crate) fn spawn(listener: TcpListener, context: Arc<ProxyContext>) -> tokio::task::AbortHandle {
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                // Out of descriptors, most likely: let some close before trying again.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let Ok(slot) = context.slots.clone().try_acquire_owned() else {
                let body = format!(
                    "forge: this sandbox already has {MAX_CONNECTIONS} connections open through its proxy"
                );
                tokio::spawn(async move {
                    let _ = respond(&mut stream, "503 Service Unavailable", &body).await;
                });
                continue;
            };
            let context = context.clone();
            tokio::spawn(async move {
                serve(stream, context).await;
                drop(slot);
            });
        }
    })
    .abort_handle()
}

/// A refusal or failure: the status the client gets and the reason.
struct Refusal {
    status: &'static str,
    verdict: Verdict,
    reason: String,
}

impl Refusal {
    fn refused(status: &'static str, reason: String) -> Self {
        Self {
            status,
            verdict: Verdict::Refused,
            reason,
        }
    }

    fn failed(reason: String) -> Self {
        Self {
            status: "502 Bad Gateway",
            verdict: Verdict::Allowed,
            reason,
        }
    }
}

/// A parsed request head.
struct Head {
    kind: ConnectionKind,
    host: String,
    port: u16,
    /// For plain HTTP, the head to send upstream (origin-form, `Connection: close`).
    upstream: Vec<u8>,
}

async fn serve(mut client: TcpStream, context: Arc<ProxyContext>) {
    let started = Instant::now();
    let started_at_ms = now_ms();
    let _ = client.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    let head_len = loop {
        if let Some(end) = find_head_end(&buf) {
            break end;
        }
        if buf.len() >= MAX_HEAD {
            let _ = respond(
                &mut client,
                "431 Request Header Fields Too Large",
                "forge: request head too large",
            )
            .await;
            return;
        }
        let mut chunk = [0u8; 4096];
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = match parse_head(&buf[..head_len]) {
        Ok(head) => head,
        Err(reason) => {
            let _ = respond(&mut client, "400 Bad Request", &format!("forge: {reason}")).await;
            return;
        }
    };
    let rest = buf[head_len..].to_vec();
    let mut record = Connection {
        sandbox_id: context.sandbox.clone(),
        started_at_ms,
        kind: head.kind,
        host: head.host.clone(),
        port: head.port,
        address: None,
        verdict: Verdict::Allowed,
        reason: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
    };
    match relay(&mut client, &head, rest, &context, &mut record).await {
        Ok(()) => {}
        Err(refusal) => {
            record.verdict = refusal.verdict;
            let body = format!("forge: {}", refusal.reason);
            record.reason = Some(refusal.reason);
            let _ = respond(&mut client, refusal.status, &body).await;
        }
    }
    record.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::debug!(sandbox = %record.sandbox_id, host = %record.host, port = record.port, verdict = ?record.verdict, "egress connection");
    let _ = context.log.send(record);
}

/// Checks, connects and relays one request or tunnel.
async fn relay(
    client: &mut TcpStream,
    head: &Head,
    rest: Vec<u8>,
    context: &ProxyContext,
    record: &mut Connection,
) -> Result<(), Refusal> {
    let allowlist = &context.allowlist;
    allowlist
        .check_destination(&head.host, head.port)
        .map_err(|reason| Refusal::refused("403 Forbidden", reason))?;
    let addrs = context
        .resolver
        .resolve(&head.host, head.port)
        .await
        .map_err(|err| Refusal::failed(format!("cannot resolve {}: {err}", head.host)))?;
    record.address = addrs.first().map(ToString::to_string);
    for ip in &addrs {
        if let Err(reason) = allowlist.check_address(&head.host, *ip, head.port) {
            record.address = Some(ip.to_string());
            return Err(Refusal::refused("403 Forbidden", reason));
        }
    }
    let (mut upstream, ip) = connect(&addrs, head.port).await.map_err(Refusal::failed)?;
    record.address = Some(ip.to_string());
    let _ = upstream.set_nodelay(true);
    let mut first = rest;
    match head.kind {
        ConnectionKind::Connect => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await
                .map_err(|err| Refusal::failed(format!("client went away: {err}")))?;
            // The server name must be the host that was checked; read the whole first
            // record before anything reaches the destination.
            loop {
                match tls::client_hello(&first) {
                    Hello::NotTls | Hello::ServerName(None) => break,
                    Hello::ServerName(Some(name)) => {
                        let name = name.strip_suffix('.').unwrap_or(&name);
                        if !name.eq_ignore_ascii_case(head.host.trim_matches(['[', ']'])) {
                            record.verdict = Verdict::Refused;
                            record.reason = Some(format!(
                                "TLS server name {name} does not match the CONNECT host {}",
                                head.host
                            ));
                            return Ok(());
                        }
                        break;
                    }
                    Hello::Incomplete if first.len() < tls::MAX_RECORD => {
                        let mut chunk = vec![0u8; tls::MAX_RECORD - first.len()];
                        match client.read(&mut chunk).await {
                            Ok(0) | Err(_) => return Ok(()),
                            Ok(n) => first.extend_from_slice(&chunk[..n]),
                        }
                    }
                    Hello::Malformed | Hello::Incomplete => {
                        record.verdict = Verdict::Refused;
                        record.reason = Some("unreadable TLS ClientHello".to_owned());
                        return Ok(());
                    }
                }
            }
        }
        ConnectionKind::Http => {
            upstream
                .write_all(&head.upstream)
                .await
                .map_err(|err| Refusal::failed(format!("cannot send to {ip}: {err}")))?;
        }
    }
    if !first.is_empty() {
        if upstream.write_all(&first).await.is_err() {
            return Ok(());
        }
        record.bytes_up += first.len() as u64;
    }
    match Splicer::new(RELAY_BUFFER) {
        Ok(splicer) => {
            let moved = Moved::default();
            // However it ends, what moved is recorded.
            let _ = splicer.relay(client, &upstream, &moved).await;
            record.bytes_up += moved.forward.load(Ordering::Relaxed);
            record.bytes_down += moved.backward.load(Ordering::Relaxed);
        }
        Err(_) => {
            if let Ok((up, down)) = tokio::io::copy_bidirectional_with_sizes(
                client,
                &mut upstream,
                RELAY_BUFFER,
                RELAY_BUFFER,
            )
            .await
            {
                record.bytes_up += up;
                record.bytes_down += down;
            }
        }
    }
    Ok(())
}

/// Connects to the first address that answers.
async fn connect(addrs: &[IpAddr], port: u16) -> Result<(TcpStream, IpAddr), String> {
    let mut last = String::from("no addresses");
    for ip in addrs {
        match TcpStream::connect(SocketAddr::new(*ip, port)).await {
            Ok(stream) => return Ok((stream, *ip)),
            Err(err) => last = format!("cannot connect to {}: {err}", SocketAddr::new(*ip, port)),
        }
    }
    Err(last)
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Splits `host:port`, `[v6]:port`, or a bare host with a default port.
fn split_authority(authority: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    let bad = || format!("{authority:?} is not a host and port");
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(bad)?;
        (format!("[{inside}]"), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (authority.to_owned(), None),
        }
    };
    let port = match port {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(bad)?,
        None => default_port.ok_or_else(bad)?,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host, port))
}

/// Headers that concern the hop to the proxy, not the destination.
const HOP_HEADERS: [&str; 5] = [
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "upgrade",
];

fn parse_head(bytes: &[u8]) -> Result<Head, String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) | Err(_) => return Err("malformed request".to_owned()),
    }
    let method = request.method.unwrap_or_default();
    let target = request.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target, None)?;
        return Ok(Head {
            kind: ConnectionKind::Connect,
            host,
            port,
            upstream: Vec::new(),
        });
    }
    let Some(rest) = target
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])
    else {
        return Err(
            "this proxy takes absolute http:// URIs and CONNECT tunnels (use HTTPS through CONNECT)"
                .to_owned(),
        );
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let (host, port) = split_authority(authority, Some(80))?;
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let mut upstream = format!(
        "{method} {path} HTTP/1.{}\r\n",
        request.version.unwrap_or(1)
    )
    .into_bytes();
    let mut has_host = false;
    for header in request.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        if HOP_HEADERS.contains(&name.as_str()) {
            continue;
        }
        has_host |= name == "host";
        upstream.extend_from_slice(header.name.as_bytes());
        upstream.extend_from_slice(b": ");
        upstream.extend_from_slice(header.value);
        upstream.extend_from_slice(b"\r\n");
    }
    if !has_host {
        upstream.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    // One request per connection: a second request on it could name another host.
    upstream.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Head {
        kind: ConnectionKind::Http,
        host,
        port,
        upstream,
    })
}

async fn respond(client: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}\n",
        body.len() + 1
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn heads_become_destinations_and_origin_form_requests() {
        let head = parse_head(
            b"GET http://Example.org:8080/a?b HTTP/1.1\r\nHost: example.org:8080\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (head.kind, head.host.as_str(), head.port, String::from_utf8(head.upstream).unwrap()),
            (
                ConnectionKind::Http,
                "Example.org",
                8080,
                "GET /a?b HTTP/1.1\r\nHost: example.org:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n".to_owned()
            )
        );
        let connect = parse_head(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            (connect.kind, connect.host.as_str(), connect.port),
            (ConnectionKind::Connect, "[::1]", 443)
        );
        let errors: Vec<_> = [
            &b"GET /relative HTTP/1.1\r\n\r\n"[..],
            b"CONNECT example.org HTTP/1.1\r\n\r\n",
            b"nonsense\r\n\r\n",
        ]
        .iter()
        .map(|bytes| parse_head(bytes).err())
        .collect();
        assert_eq!(
            errors,
            vec![
                Some("this proxy takes absolute http:// URIs and CONNECT tunnels (use HTTPS through CONNECT)".to_owned()),
                Some("\"example.org\" is not a host and port".to_owned()),
                Some("malformed request".to_owned()),
            ]
        );
    }
}
