//! Network routes through `app(state)`: an allowlist sandbox's connection log, port
//! forwards, and refusals of bad network requests. A server on 127.0.0.2 plays the
//! internet; the proxy resolves the test's names from the server's `hosts` setting.

use std::io::{Read, Write};
use std::net::IpAddr;

use axum::http::StatusCode;
use forge_test_support::http::TestServer;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{Ctx, error};

fn with_names(config: &mut forge_server::ServerConfig) {
    let internet: IpAddr = "127.0.0.2".parse().unwrap();
    config.hosts = [
        ("allowed.test".to_owned(), vec![internet]),
        ("other.test".to_owned(), vec![internet]),
    ]
    .into();
}

/// The sandbox's connection log once it holds `count` records, without the fields that
/// vary from run to run.
async fn connections(ctx: &Ctx, id: &str, count: usize) -> Value {
    for _ in 0..200 {
        let (status, body) = ctx
            .send("GET", &format!("/api/v1/sandboxes/{id}/connections"), "")
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut records = body.as_array().cloned().unwrap_or_default();
        if records.len() >= count {
            for record in &mut records {
                let record = record.as_object_mut().unwrap();
                for varying in ["id", "started_at", "duration_ms"] {
                    record.remove(varying);
                }
            }
            return Value::Array(records);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the connection log of {id} never held {count} records");
}

#[tokio::test]
async fn allowlist_sandboxes_log_every_connection_attempt() {
    let ctx = Ctx::new(with_names).await;
    let internet = TestServer::start("127.0.0.2:0", "hello");
    let port = internet.addr.port();
    let (status, body) = ctx
        .send(
            "POST",
            "/api/v1/sandboxes",
            r#"{"image":"host","network":"allowlist","allowed_hosts":["allowed.test","127.0.0.2/32"]}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let command =
        format!("curl -sS http://allowed.test:{port}/; echo; curl -sS http://other.test:{port}/");
    let (status, body) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/exec"),
            &json!({ "command": command }).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["stdout"],
        format!("hello\nforge: destination other.test:{port} is not in this sandbox's allowlist\n")
    );
    let refusal = format!("destination other.test:{port} is not in this sandbox's allowlist");
    assert_eq!(
        connections(&ctx, &id, 2).await,
        json!([
            {"sandbox_id": id, "kind": "http", "host": "allowed.test", "port": port,
             "address": "127.0.0.2", "verdict": "allowed", "bytes_up": 0,
             "bytes_down": internet.response_len()},
            {"sandbox_id": id, "kind": "http", "host": "other.test", "port": port,
             "verdict": "refused", "reason": refusal, "bytes_up": 0, "bytes_down": 0},
        ])
    );
}

#[tokio::test]
async fn bad_network_requests_name_the_field() {
    let ctx = Ctx::new(|_| {}).await;
    let cases = [
        r#"{"image":"host","network":"bridge"}"#,
        r#"{"image":"host","network":"allowlist","allowed_hosts":["ex*ample.org"]}"#,
    ];
    let mut got = Vec::new();
    for body in cases {
        got.push(ctx.send("POST", "/api/v1/sandboxes", body).await);
    }
    assert_eq!(
        got,
        vec![
            (
                StatusCode::BAD_REQUEST,
                error(
                    "BAD_REQUEST",
                    "invalid network: unknown network mode \"bridge\"; expected one of none, allowlist, open"
                )
            ),
            (
                StatusCode::BAD_REQUEST,
                error(
                    "BAD_REQUEST",
                    "invalid allowed_hosts: invalid host pattern \"ex*ample.org\": '*' is only allowed as a leading '*.'"
                )
            ),
        ]
    );
}

#[tokio::test]
async fn exposed_ports_answer_from_the_host_until_removed() {
    let ctx = Ctx::new(|_| {}).await;
    let id = ctx.spawn().await;
    let start = json!({
        "command": "cd /workspace && echo from the sandbox > index.html && \
                    (python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &) && \
                    for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8000/ && exit 0; sleep 0.05; done; exit 1"
    });
    let (status, body) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/exec"),
            &start.to_string(),
        )
        .await;
    assert_eq!(
        (status, &body["exit_code"]),
        (StatusCode::OK, &json!(0)),
        "{body}"
    );

    let ports = format!("/api/v1/sandboxes/{id}/ports");
    let (status, forward) = ctx.send("POST", &ports, r#"{"port":8000}"#).await;
    assert_eq!(status, StatusCode::CREATED, "{forward}");
    let address = forward["host_address"].as_str().unwrap().to_owned();
    assert!(address.starts_with("127.0.0.1:"), "{address}");
    let fetched = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream
            .write_all(b"GET /index.html HTTP/1.0\r\n\r\n")
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response.lines().last().unwrap_or_default().to_owned()
    })
    .await
    .unwrap();
    assert_eq!(fetched, "from the sandbox");

    let listed = ctx.send("GET", &ports, "").await;
    let removed = ctx.send("DELETE", &format!("{ports}/8000"), "").await.0;
    let after = ctx.send("GET", &ports, "").await;
    let again = ctx.send("DELETE", &format!("{ports}/8000"), "").await;
    let zero = ctx.send("POST", &ports, r#"{"port":0}"#).await;
    assert_eq!(
        (listed, removed, after, again, zero),
        (
            (StatusCode::OK, json!([forward])),
            StatusCode::NO_CONTENT,
            (StatusCode::OK, json!([])),
            (
                StatusCode::NOT_FOUND,
                error(
                    "NOT_FOUND",
                    &format!("port 8000 of sandbox {id:?} is not exposed")
                )
            ),
            (
                StatusCode::BAD_REQUEST,
                error("BAD_REQUEST", "invalid port: must be from 1 to 65535")
            ),
        )
    );
}

#[tokio::test]
async fn a_templates_allowed_hosts_make_its_sandboxes_allowlist_sandboxes() {
    let ctx = Ctx::new(with_names).await;
    let internet = TestServer::start("127.0.0.2:0", "via the template");
    let (status, body) = ctx
        .send(
            "POST",
            "/api/v1/templates",
            r#"{"name":"egress","image":"host","allowed_hosts":["allowed.test","127.0.0.2/32"]}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = ctx
        .send("POST", "/api/v1/templates/egress/spawn", "{}")
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let command = format!(
        "echo $HTTPS_PROXY; curl -sS http://allowed.test:{}/; echo; curl -sS -m 2 --noproxy '*' http://127.0.0.2:{}/ >/dev/null 2>&1 || echo no route",
        internet.addr.port(),
        internet.addr.port()
    );
    let (status, body) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/exec"),
            &json!({ "command": command }).to_string(),
        )
        .await;
    assert_eq!(
        (status, &body["stdout"]),
        (
            StatusCode::OK,
            &json!("http://127.0.0.1:3128\nvia the template\nno route\n")
        ),
        "{body}"
    );
}
