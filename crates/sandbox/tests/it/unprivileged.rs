//! The jail without root: user namespaces alone, with what cannot be enforced reported.
//!
//! The outer test re-runs this test binary as `nobody` (through `setpriv`) on the inner
//! test, which is ignored in normal runs.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use forge_sandbox::{Backend, JailBackend, JailConfig};
use forge_test_support::oci::{Layer, TestImage};
use forge_types::{ExecRequest, SandboxSpec};
use pretty_assertions::assert_eq;

use crate::text;

const NOBODY: u32 = 65_534;

#[tokio::test]
async fn without_root_sandboxes_run_on_user_namespaces_alone() {
    let dir = forge_test_support::data_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let data = dir.path().join("nobody");
    std::fs::create_dir(&data).unwrap();
    rustix::fs::chown(
        &data,
        Some(rustix::process::Uid::from_raw(NOBODY)),
        Some(rustix::process::Gid::from_raw(NOBODY)),
    )
    .unwrap();
    let binary = std::env::current_exe().unwrap();
    #[expect(
        clippy::disallowed_methods,
        reason = "re-runs this test binary as an ordinary user"
    )]
    let output = Command::new("setpriv")
        .args([
            "--reuid",
            &NOBODY.to_string(),
            "--regid",
            &NOBODY.to_string(),
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&binary)
        .args([
            "--exact",
            "unprivileged::inner",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FORGE_UNPRIVILEGED_DATA", &data)
        .output()
        .unwrap();
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "inner test failed:\n{stdout}\n{}",
        text(&output.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[tokio::test]
#[ignore = "run by without_root_sandboxes_run_on_user_namespaces_alone as an ordinary user"]
async fn inner() {
    let Some(data) = std::env::var_os("FORGE_UNPRIVILEGED_DATA") else {
        return;
    };
    assert!(!rustix::process::geteuid().is_root());
    let backend = JailBackend::new(JailConfig::new(&data)).unwrap();
    let info = backend.create(SandboxSpec::default()).await.unwrap();
    let missing: Vec<&String> = info
        .degraded
        .iter()
        .filter(|n| n.contains("cgroup"))
        .collect();
    assert!(
        !missing.is_empty(),
        "unenforced cgroup limits must be reported: {:?}",
        info.degraded
    );
    assert!(
        info.degraded.iter().any(|n| n.contains("without root")),
        "{:?}",
        info.degraded
    );
    let result = backend
        .exec(&info.id, ExecRequest::shell("id -u; cat /proc/self/uid_map | tr -s ' '; echo hi > /workspace/f; cat /workspace/f; touch /usr/x 2>&1 | head -1"))
        .await
        .unwrap();
    assert_eq!(
        text(&result.stdout),
        format!("0\n 0 {NOBODY} 1\nhi\ntouch: cannot touch '/usr/x': Read-only file system\n")
    );
    backend
        .write_file(&info.id, "data.bin", vec![1, 2, 3], None)
        .await
        .unwrap();
    assert_eq!(
        backend
            .read_file(&info.id, "/workspace/data.bin")
            .await
            .unwrap(),
        vec![1, 2, 3]
    );
    backend.destroy(&info.id).await.unwrap();

    // Images too: their layers belong to this user, who is root inside.
    let layout = std::path::Path::new(&data).join("layout");
    TestImage::new(vec![
        Layer::busybox().file("etc/motd", "base"),
        Layer::new().whiteout("etc/motd").file("etc/added", "added"),
    ])
    .write_oci_layout(&layout, "t");
    backend
        .image_store()
        .import(&layout, Some("mine:1"), &forge_image::NoProgress)
        .unwrap();
    let info = backend
        .create(SandboxSpec {
            image: "mine:1".into(),
            ..SandboxSpec::default()
        })
        .await
        .unwrap();
    let result = backend
        .exec(
            &info.id,
            ExecRequest::shell(
                "stat -c %u /bin/busybox; cat /etc/added; test -e /etc/motd || echo gone; echo x > /etc/new && cat /etc/new",
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        (text(&result.stdout), text(&result.stderr)),
        ("0\naddedgone\nx\n".to_owned(), String::new())
    );
    let snapshot = backend.snapshot(&info.id, "mine:2").await.unwrap();
    assert_eq!(snapshot.layers, 3);
    backend.destroy(&info.id).await.unwrap();

    // Networking needs no root either: the init hands over its sockets, and pasta runs
    // as this user in the sandbox's user namespace.
    let internet = forge_test_support::http::TestServer::start("127.0.0.2:0", "through the proxy");
    let info = backend
        .create(SandboxSpec {
            network: forge_types::NetworkMode::Allowlist,
            allowed_hosts: vec!["127.0.0.2/32".to_owned()],
            ..SandboxSpec::default()
        })
        .await
        .unwrap();
    let script = format!(
        "curl -sS http://{}/; echo; (python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &); \
         for i in $(seq 100); do curl -s -o /dev/null --noproxy '*' http://127.0.0.1:8000/ && exit 0; sleep 0.05; done",
        internet.addr
    );
    let result = backend
        .exec(&info.id, ExecRequest::shell(script))
        .await
        .unwrap();
    assert_eq!(
        (text(&result.stdout), text(&result.stderr)),
        ("through the proxy\n".to_owned(), String::new())
    );
    let forward = backend
        .expose_port(&info.id, 8000, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let status = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&forward.host_address).unwrap();
        stream.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response.lines().next().unwrap_or_default().to_owned()
    })
    .await
    .unwrap();
    assert_eq!(status, "HTTP/1.0 200 OK");
    backend.destroy(&info.id).await.unwrap();

    let info = backend
        .create(SandboxSpec {
            network: forge_types::NetworkMode::Open,
            ..SandboxSpec::default()
        })
        .await
        .unwrap();
    let result = backend
        .exec(
            &info.id,
            ExecRequest::shell(
                "ip -4 route | LC_ALL=C sort; curl -s -m 2 http://169.254.169.254/ || echo blocked",
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        text(&result.stdout),
        "10.0.2.0/24 dev eth0 proto kernel scope link src 10.0.2.15 \ndefault via 10.0.2.2 dev eth0 \nprohibit 100.100.100.200 \nprohibit 169.254.0.0/16 \nblocked\n"
    );
    backend.destroy(&info.id).await.unwrap();
    backend.settle().await.unwrap();
}
