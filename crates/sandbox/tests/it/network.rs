//! Network modes for real: allowlist sandboxes reach listed hosts only through the egress
//! proxy, open sandboxes reach the world but not the host's loopback or metadata addresses,
//! and exposed ports answer from the host. Servers the test starts on the host play the
//! internet; names resolve through the proxy's static hosts map (there is no DNS here).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::IpAddr;

use forge_sandbox::net::Resolver;
use forge_sandbox::{Backend, JailBackend};
use forge_test_support::http::TestServer;
use forge_types::{Connection, ConnectionKind, NetworkMode, PortForward, SandboxSpec, Verdict};
use pretty_assertions::assert_eq;

use crate::Ctx;

/// A backend whose proxy resolves the test's names: `allowed.test` and `other.test` to the
/// stand-in internet on 127.0.0.2, `rebind.test` to the host's own loopback.
fn ctx_with_names() -> Ctx {
    let dir = forge_test_support::data_dir();
    let ip = |text: &str| text.parse::<IpAddr>().unwrap();
    let hosts = BTreeMap::from([
        ("allowed.test".to_owned(), vec![ip("127.0.0.2")]),
        ("other.test".to_owned(), vec![ip("127.0.0.2")]),
        ("rebind.test".to_owned(), vec![ip("127.0.0.1")]),
    ]);
    let config = forge_sandbox::JailConfig {
        resolver: Resolver::with_hosts(hosts),
        ..Ctx::config(dir.path())
    };
    let backend = JailBackend::new(config).expect("jail backend");
    Ctx { dir, backend }
}

/// Every record the log holds right now, ordered and with times cleared.
fn drain(log: &mut tokio::sync::broadcast::Receiver<Connection>) -> Vec<Connection> {
    let mut records = Vec::new();
    while let Ok(mut record) = log.try_recv() {
        record.started_at_ms = 0;
        record.duration_ms = 0;
        records.push(record);
    }
    records.sort_by_key(|r| (r.host.clone(), r.kind == ConnectionKind::Http, r.bytes_down));
    records
}

#[tokio::test]
async fn allowlist_reaches_listed_hosts_only_through_the_proxy() {
    let ctx = ctx_with_names();
    let internet = TestServer::start("127.0.0.2:0", "hello from the internet");
    let port = internet.addr.port();
    let mut log = ctx.backend.connection_log().unwrap();
    let id = ctx
        .sandbox_with(SandboxSpec {
            network: NetworkMode::Allowlist,
            allowed_hosts: vec![
                "allowed.test".to_owned(),
                "rebind.test".to_owned(),
                "127.0.0.2/32".to_owned(),
            ],
            ..SandboxSpec::default()
        })
        .await;
    let script = format!(
        "for url in http://allowed.test:{port}/ http://other.test:{port}/ http://rebind.test:{port}/; do \
           curl -sS -m 5 \"$url\"; echo \" [$?]\"; done; \
         curl -sS -m 5 -p http://allowed.test:{port}/tunnel; echo \" [$?]\"; \
         curl -sS -m 5 -p http://other.test:{port}/ 2>&1; echo \" [$?]\"; \
         curl -sS -m 5 --noproxy '*' http://127.0.0.2:{port}/ 2>&1; echo \" [$?]\"; \
         echo $HTTPS_PROXY $PIP_PROXY"
    );
    let output = ctx.sh(&id, &script).await;
    let stdout = String::from_utf8_lossy(&output.stdout).replace(&port.to_string(), "PORT");
    assert_eq!(
        stdout,
        "hello from the internet [0]\n\
         forge: destination other.test:PORT is not in this sandbox's allowlist\n [0]\n\
         forge: rebind.test resolves to 127.0.0.1, a loopback address, which is not listed as an address\n [0]\n\
         hello from the internet [0]\n\
         curl: (56) CONNECT tunnel failed, response 403\n [56]\n\
         curl: (7) Failed to connect to 127.0.0.2 port PORT after 0 ms: Couldn't connect to server\n [7]\n\
         http://127.0.0.1:3128 http://127.0.0.1:3128\n"
    );
    // Only the two allowed requests reached the server; the direct one had no route.
    assert_eq!(internet.hits(), 2);

    // A tunnel to an allowed host cannot carry a TLS handshake for another name. (The
    // proxy connects before it reads the handshake, so it can answer 502 when the
    // destination is down; the destination sees a connection but no bytes.)
    let sni = r"python3 - <<'EOF'
import socket, ssl
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'CONNECT allowed.test:PORT HTTP/1.1\r\n\r\n')
print(s.recv(100).split(b'\r\n')[0].decode())
try:
    ssl.create_default_context().wrap_socket(s, server_hostname='evil.test')
except OSError:
    print('handshake refused')
EOF"
    .replace("PORT", &port.to_string());
    assert_eq!(
        ctx.ok(&id, &sni).await,
        "HTTP/1.1 200 Connection Established\nhandshake refused\n"
    );

    ctx.backend.destroy(&id).await.unwrap();
    let record =
        |kind, host: &str, address: &str, verdict, reason: Option<&str>, up, down| Connection {
            sandbox_id: id.clone(),
            started_at_ms: 0,
            kind,
            host: host.to_owned(),
            port,
            address: Some(address.to_owned()).filter(|a| !a.is_empty()),
            verdict,
            reason: reason.map(|r| r.replace("PORT", &port.to_string())),
            bytes_up: up,
            bytes_down: down,
            duration_ms: 0,
        };
    let got = drain(&mut log);
    let tunnel_up = got
        .iter()
        .find(|r| r.kind == ConnectionKind::Connect && r.verdict == Verdict::Allowed)
        .map_or(0, |r| r.bytes_up);
    assert!(tunnel_up > 0, "the tunnelled request counts as bytes up");
    assert_eq!(
        got,
        vec![
            record(
                ConnectionKind::Connect,
                "allowed.test",
                "127.0.0.2",
                Verdict::Refused,
                Some("TLS server name evil.test does not match the CONNECT host allowed.test"),
                0,
                0
            ),
            record(
                ConnectionKind::Connect,
                "allowed.test",
                "127.0.0.2",
                Verdict::Allowed,
                None,
                tunnel_up,
                internet.response_len()
            ),
            record(
                ConnectionKind::Http,
                "allowed.test",
                "127.0.0.2",
                Verdict::Allowed,
                None,
                0,
                internet.response_len()
            ),
            record(
                ConnectionKind::Connect,
                "other.test",
                "",
                Verdict::Refused,
                Some("destination other.test:PORT is not in this sandbox's allowlist"),
                0,
                0
            ),
            record(
                ConnectionKind::Http,
                "other.test",
                "",
                Verdict::Refused,
                Some("destination other.test:PORT is not in this sandbox's allowlist"),
                0,
                0
            ),
            record(
                ConnectionKind::Http,
                "rebind.test",
                "127.0.0.1",
                Verdict::Refused,
                Some(
                    "rebind.test resolves to 127.0.0.1, a loopback address, which is not listed as an address"
                ),
                0,
                0
            ),
        ]
    );
}

#[tokio::test]
async fn bad_allowlist_entries_are_refused_by_field() {
    let ctx = Ctx::new();
    let err = ctx
        .backend
        .create(SandboxSpec {
            network: NetworkMode::Allowlist,
            allowed_hosts: vec!["ex*ample.org".to_owned()],
            ..SandboxSpec::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid allowed_hosts: invalid host pattern \"ex*ample.org\": '*' is only allowed as a leading '*.'"
    );
}

/// The host's address on its default route: reachable from an open sandbox through pasta,
/// unlike its loopback.
fn host_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("198.51.100.1:9").ok()?;
    Some(socket.local_addr().ok()?.ip())
}

#[tokio::test]
async fn open_reaches_the_world_but_not_the_hosts_loopback_or_metadata() {
    let Some(host) = host_address() else {
        eprintln!("skipped: this host has no default route for pasta to use");
        return;
    };
    let ctx = Ctx::new();
    let world = TestServer::start(&format!("{host}:0"), "hello world");
    let loopback = TestServer::start("127.0.0.1:0", "host secret");
    let id = ctx
        .sandbox_with(SandboxSpec {
            network: NetworkMode::Open,
            ..SandboxSpec::default()
        })
        .await;
    let script = format!(
        "curl -sS -m 5 http://{world}/; echo \" [$?]\"; \
         for url in http://127.0.0.1:{lp}/ http://10.0.2.2:{lp}/ http://169.254.169.254/; do \
           curl -s -m 2 -o /dev/null \"$url\" && echo \"$url reached\" || echo \"$url unreachable\"; done; \
         ip route del prohibit 169.254.0.0/16 2>&1; echo \"[$?]\"",
        world = world.addr,
        lp = loopback.addr.port(),
    );
    let output = ctx.sh(&id, &script).await;
    let stdout =
        String::from_utf8_lossy(&output.stdout).replace(&loopback.addr.port().to_string(), "LP");
    assert_eq!(
        stdout,
        "hello world [0]\n\
         http://127.0.0.1:LP/ unreachable\n\
         http://10.0.2.2:LP/ unreachable\n\
         http://169.254.169.254/ unreachable\n\
         RTNETLINK answers: Operation not permitted\n[2]\n"
    );
    assert_eq!((world.hits(), loopback.hits()), (1, 0));

    // Destroy stops the sandbox's pasta.
    let pid_file = ctx.dir.path().join("sandboxes").join(format!("{id}.pasta"));
    let pasta: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    ctx.backend.destroy(&id).await.unwrap();
    let mut alive = true;
    for _ in 0..100 {
        alive = std::fs::read_to_string(format!("/proc/{pasta}/stat"))
            .is_ok_and(|stat| !stat.contains(") Z "));
        if !alive {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !alive,
        "pasta {pasta} outlived its sandbox: {:?} {:?}",
        std::fs::read_to_string(format!("/proc/{pasta}/stat")),
        std::fs::read_to_string(&pid_file)
    );
}

#[tokio::test]
async fn an_exposed_port_answers_from_the_host_until_removed() {
    let ctx = Ctx::new();
    let id = ctx.sandbox().await;
    ctx.ok(
        &id,
        "mkdir -p /workspace/site && echo served from the sandbox > /workspace/site/index.html",
    )
    .await;
    ctx.backend
        .spawn(
            &id,
            forge_types::ProcessSpec::new(forge_types::Command::Shell(
                "cd /workspace/site && exec python3 -m http.server 8000 --bind 127.0.0.1".into(),
            )),
        )
        .await
        .unwrap();
    ctx.ok(
        &id,
        "for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8000/ && exit 0; sleep 0.05; done; exit 1",
    )
    .await;
    let forward = ctx
        .backend
        .expose_port(&id, 8000, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let get = |address: &str| -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect(address)?;
        stream.write_all(b"GET /index.html HTTP/1.0\r\n\r\n")?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response.lines().last().unwrap_or_default().to_owned())
    };
    let address = forward.host_address.clone();
    let body = tokio::task::spawn_blocking(move || get(&address))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body, "served from the sandbox");
    assert_eq!(
        ctx.backend.ports(&id).await.unwrap(),
        vec![PortForward {
            port: 8000,
            host_address: forward.host_address.clone(),
        }]
    );
    ctx.backend.unexpose_port(&id, 8000).await.unwrap();
    assert_eq!(ctx.backend.ports(&id).await.unwrap(), Vec::new());
    let address = forward.host_address.clone();
    let after = tokio::task::spawn_blocking(move || get(&address))
        .await
        .unwrap();
    assert_eq!(
        after.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused)
    );
}
