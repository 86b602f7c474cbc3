//! A smoke test of `forge serve` on a real socket, and the CLI client against it.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::server::{KEY, Server};

#[tokio::test]
async fn serve_answers_on_a_real_socket_and_the_cli_drives_it() {
    let data = forge_test_support::data_dir();
    let server = Server::start(data.path(), Some(KEY), &[]).await;

    // Without the key: 401 with a JSON body and the request id echoed.
    let anonymous = reqwest::Client::new()
        .get(server.api("/sandboxes"))
        .header("x-request-id", "req-42")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    assert_eq!(anonymous.headers()["x-request-id"], "req-42");
    let body: serde_json::Value = anonymous.json().await.unwrap();
    assert_eq!(
        body,
        json!({"code": "UNAUTHORIZED", "message": "invalid or missing API key"})
    );

    // The API docs are open, and the OpenAPI document lists the routes.
    let spec: serde_json::Value = reqwest::get(format!("{}/api/v1/openapi.json", server.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths: Vec<&String> = spec["paths"].as_object().unwrap().keys().collect();
    assert!(
        paths.iter().any(|p| *p == "/api/v1/sandboxes/{id}/exec"),
        "{paths:?}"
    );
    let ids: Vec<&str> = spec["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        ids.len(),
        "operation ids must be unique: {ids:?}"
    );
    let docs = reqwest::get(format!("{}/api/v1/docs/", server.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        docs.contains("swagger-ui-bundle.js") && !docs.contains("http"),
        "the docs page must not load anything remote"
    );

    // The CLI client: spawn, exec (streamed, with the command's exit code), files, kill.
    let forge = |args: &[&str]| {
        #[expect(
            clippy::disallowed_methods,
            reason = "runs the forge binary under test"
        )]
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_forge"))
            .args(args)
            .env("FORGE_URL", &server.url)
            .env("FORGE_API_KEY", KEY)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, id, _) = forge(&["spawn", "--image", "host", "--ttl", "5m"]);
    assert_eq!(code, Some(0));
    let id = id.trim().to_owned();
    assert_eq!(
        forge(&[
            "exec",
            &id,
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 7"
        ]),
        (Some(7), "out\n".into(), "err\n".into())
    );
    let local = data.path().join("upload.bin");
    std::fs::write(&local, (0..=255u8).collect::<Vec<_>>()).unwrap();
    assert_eq!(
        forge(&[
            "files",
            "put",
            &id,
            local.to_str().unwrap(),
            "/workspace/bytes.bin"
        ])
        .0,
        Some(0)
    );
    let back = data.path().join("download.bin");
    assert_eq!(
        forge(&[
            "files",
            "get",
            &id,
            "/workspace/bytes.bin",
            back.to_str().unwrap()
        ])
        .0,
        Some(0)
    );
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(&local).unwrap()
    );
    let (code, listing, _) = forge(&["files", "ls", &id]);
    assert_eq!(code, Some(0));
    assert!(listing.contains("bytes.bin"), "{listing}");
    let (code, listed, _) = forge(&["list", "--json"]);
    assert_eq!(code, Some(0));
    assert!(listed.contains(&id), "{listed}");

    // `forge port` prints where a sandbox's server answers on the host.
    let serve = "cd /workspace && (python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &) && \
                 for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8000/ && exit 0; sleep 0.05; done; exit 1";
    assert_eq!(forge(&["exec", &id, "--", "sh", "-c", serve]).0, Some(0));
    let (code, address, err) = forge(&["port", &id, "8000"]);
    assert_eq!(code, Some(0), "{err}");
    let address = address.trim().to_owned();
    let listing = reqwest::get(format!("http://{address}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listing.contains("bytes.bin"), "{listing}");
    assert_eq!(
        forge(&["port", &id]),
        (Some(0), format!("8000 -> {address}\n"), String::new())
    );
    assert_eq!(forge(&["port", &id, "8000", "--remove"]).0, Some(0));
    assert_eq!(
        forge(&["port", &id]),
        (Some(0), String::new(), String::new())
    );
    assert_eq!(forge(&["kill", &id]).0, Some(0));
    let (code, _, err) = forge(&["exec", &id, "--", "true"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("404 Not Found NOT_FOUND"), "{err}");
    let (code, _, err) = forge(&["list", "--api-key", "wrong-key-wrong-key"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("pass --api-key or set FORGE_API_KEY"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn listening_beyond_loopback_without_a_key_is_refused() {
    let data = forge_test_support::data_dir();
    #[expect(
        clippy::disallowed_methods,
        reason = "runs the forge binary under test"
    )]
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_forge"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(data.path())
        .env_remove("FORGE_API_KEY")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without an API key"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_full_pool_rejects_or_queues() {
    let data = forge_test_support::data_dir();
    let server = Server::start(data.path(), None, &["--max-sandboxes", "2"]).await;
    let first = server.spawn().await;
    let _second = server.spawn().await;
    let (status, body) = server.post("/sandboxes", &json!({"image": "host"})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("UNAVAILABLE")),
        "{body}"
    );
    let (_, pool) = server.get("/pool/status").await;
    assert_eq!(
        (
            pool["enabled"].as_bool(),
            pool["vms"].as_u64(),
            pool["max_vms"].as_u64()
        ),
        (Some(true), Some(2), Some(2))
    );
    // Destroying one makes room again.
    server
        .http
        .delete(server.api(&format!("/sandboxes/{first}")))
        .send()
        .await
        .unwrap();
    let (status, _) = server.post("/sandboxes", &json!({"image": "host"})).await;
    assert_eq!(status, 201);
    server.stop().await;

    // In queue mode a spawn waits for room instead.
    let queued = forge_test_support::data_dir();
    let config = queued.path().join("forge.toml");
    std::fs::write(
        &config,
        "[pool]\nmax_sandboxes = 1\noverflow = \"queue\"\nqueue_timeout = \"20s\"\n",
    )
    .unwrap();
    let server = Server::start(queued.path(), None, &["--config", config.to_str().unwrap()]).await;
    let holder = server.spawn().await;
    let waiting = {
        let http = server.http.clone();
        let url = server.api("/sandboxes");
        tokio::spawn(async move {
            http.post(url)
                .json(&json!({"image": "host"}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (_, pool) = server.get("/pool/status").await;
    assert_eq!(
        (pool["overflow"].as_str(), pool["queued"].as_u64()),
        (Some("queue"), Some(1)),
        "{pool}"
    );
    server
        .http
        .delete(server.api(&format!("/sandboxes/{holder}")))
        .send()
        .await
        .unwrap();
    assert_eq!(waiting.await.unwrap(), 201);
    server.stop().await;
}

#[tokio::test]
async fn expired_sandboxes_are_reaped_with_an_event() {
    let data = forge_test_support::data_dir();
    let server = Server::start(data.path(), None, &[]).await;
    let (_, last) = server.get("/health").await;
    assert_eq!(last["status"], "ok");
    let (status, body) = server
        .post("/sandboxes", &json!({"image": "host", "ttl": "300ms"}))
        .await;
    assert_eq!(status, 201);
    let id = body["id"].as_str().unwrap().to_owned();
    let mut gone = false;
    for _ in 0..100 {
        if server.get(&format!("/sandboxes/{id}")).await.0 == 404 {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(gone, "the reaper never destroyed {id}");
    // The events, replayed from the start, tell the story with increasing ids.
    let events = server
        .http
        .get(server.api("/events"))
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    let mut body = events.bytes_stream();
    let mut text = String::new();
    while !text.contains("sandbox.expired") {
        let chunk = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            futures::StreamExt::next(&mut body),
        )
        .await
        .expect("events arrive")
        .unwrap()
        .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let kinds: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter(|e| e["sandbox_id"] == id.as_str())
        .map(|e| match e["type"].as_str() {
            Some("sandbox.created") => "created",
            Some("sandbox.running") => "running",
            Some("sandbox.destroyed") => "destroyed",
            Some("sandbox.expired") => "expired",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["created", "running", "destroyed", "expired"]);
    let ids: Vec<i64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .filter_map(|i| i.parse().ok())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]) && !ids.is_empty(),
        "{ids:?}"
    );
    server.stop().await;
}
