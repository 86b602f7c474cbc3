//! The HTTP handlers through `app(state)`, without a socket: status codes, error bodies,
//! validation, auth, templates, against a real jail backend and an in-memory store.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use forge_sandbox::{JailBackend, JailConfig};
use forge_server::{AppState, ServerConfig, app};
use http_body_util::BodyExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower::ServiceExt;

mod gateway;
mod images;
mod mcp;
mod network;

forge_test_support::sandbox_helper!();

struct Ctx {
    _dir: forge_test_support::DataDir,
    state: AppState,
}

impl Ctx {
    async fn new(configure: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = forge_test_support::data_dir();
        let mut config = ServerConfig::new(dir.path());
        configure(&mut config);
        // Handler tests never reach out to public registries.
        let backend = JailBackend::new(JailConfig {
            registries: forge_image::RegistryConfig {
                pull_missing: false,
                ..forge_image::RegistryConfig::default()
            },
            resolver: forge_sandbox::net::Resolver::with_hosts(config.hosts.clone()),
            ..JailConfig::new(dir.path())
        })
        .unwrap();
        let store = forge_store::Store::open_in_memory().await.unwrap();
        Self {
            _dir: dir,
            state: AppState::new(Arc::new(backend), store, config),
        }
    }

    async fn call(&self, request: Request<Body>) -> (StatusCode, Value) {
        let response = app(self.state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())),
        )
    }

    async fn send(&self, method: &str, path: &str, body: &str) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        self.call(request).await
    }

    async fn spawn(&self) -> String {
        let (status, body) = self
            .send("POST", "/api/v1/sandboxes", r#"{"image":"host"}"#)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }
}

fn error(code: &str, message: &str) -> Value {
    json!({"code": code, "message": message})
}

#[tokio::test]
async fn bad_input_gets_clear_json_errors() {
    let ctx = Ctx::new(|_| {}).await;
    let id = ctx.spawn().await;
    let cases = [
        (
            "POST",
            "/api/v1/sandboxes".to_owned(),
            "{not json".to_owned(),
        ),
        (
            "POST",
            "/api/v1/sandboxes".to_owned(),
            r#"{"image":"host","memory_mb":"lots"}"#.to_owned(),
        ),
        (
            "POST",
            "/api/v1/sandboxes".to_owned(),
            r#"{"image":"host","ttl":"soon"}"#.to_owned(),
        ),
        (
            "POST",
            "/api/v1/sandboxes".to_owned(),
            r#"{"image":"host","memory_mb":-5}"#.to_owned(),
        ),
        (
            "POST",
            "/api/v1/sandboxes".to_owned(),
            r#"{"image":"alpine:latest"}"#.to_owned(),
        ),
        (
            "POST",
            "/api/v1/sandboxes".to_owned(),
            r#"{"image":"host","provider":"firecracker"}"#.to_owned(),
        ),
        (
            "POST",
            format!("/api/v1/sandboxes/{id}/extend"),
            r#"{"ttl":"-5m"}"#.to_owned(),
        ),
        (
            "POST",
            format!("/api/v1/sandboxes/{id}/extend"),
            "{}".to_owned(),
        ),
        (
            "POST",
            format!("/api/v1/sandboxes/{id}/exec"),
            r#"{"command":"true","timeout":"1d"}"#.to_owned(),
        ),
        (
            "POST",
            format!("/api/v1/sandboxes/{id}/files/chmod"),
            r#"{"path":"/workspace","mode":"rwx"}"#.to_owned(),
        ),
        (
            "GET",
            format!("/api/v1/sandboxes/{id}/files"),
            String::new(),
        ),
        (
            "GET",
            "/api/v1/sandboxes/sb-00000000".to_owned(),
            String::new(),
        ),
        (
            "POST",
            "/api/v1/sandboxes/sb-00000000/exec".to_owned(),
            r#"{"command":"true"}"#.to_owned(),
        ),
        (
            "GET",
            "/api/v1/sandboxes/sb-00000000/files?path=/etc/hostname".to_owned(),
            String::new(),
        ),
        (
            "GET",
            "/api/v1/sandboxes/../../etc/passwd".to_owned(),
            String::new(),
        ),
        ("GET", "/api/v1/nowhere".to_owned(), String::new()),
        ("PUT", "/api/v1/health".to_owned(), String::new()),
    ];
    let mut got = Vec::new();
    for (method, path, body) in &cases {
        let (status, body) = ctx.send(method, path, body).await;
        got.push((status.as_u16(), body));
    }
    let id_404 = error("NOT_FOUND", "sandbox \"sb-00000000\" not found");
    assert_eq!(
        got,
        vec![
            (
                400,
                error(
                    "BAD_REQUEST",
                    "invalid request body: key must be a string at line 1 column 2"
                )
            ),
            (
                400,
                error(
                    "BAD_REQUEST",
                    "invalid request body: memory_mb: invalid type: string \"lots\", expected i64 at line 1 column 34"
                )
            ),
            (
                400,
                error("BAD_REQUEST", "invalid ttl: invalid number in \"soon\"")
            ),
            (
                400,
                error("BAD_REQUEST", "invalid memory_mb: must not be negative")
            ),
            (
                400,
                error(
                    "BAD_REQUEST",
                    "image alpine:latest is not in the store; fetch it with `forge image pull alpine:latest` or load an archive with `forge image import FILE`"
                )
            ),
            (
                400,
                error(
                    "BAD_REQUEST",
                    "invalid provider: unknown provider \"firecracker\"; this server has \"jail\""
                )
            ),
            (
                400,
                error(
                    "BAD_REQUEST",
                    "invalid ttl: negative values are not allowed: \"-5m\""
                )
            ),
            (400, error("BAD_REQUEST", "ttl is required")),
            (
                400,
                error(
                    "BAD_REQUEST",
                    "invalid timeout: unknown unit \"d\" in \"1d\""
                )
            ),
            (
                400,
                error(
                    "BAD_REQUEST",
                    "invalid mode: \"rwx\" is not an octal mode such as 0644"
                )
            ),
            (400, error("BAD_REQUEST", "path query parameter required")),
            (404, id_404.clone()),
            (404, id_404.clone()),
            (404, id_404),
            (
                404,
                error(
                    "NOT_FOUND",
                    "no route for GET /api/v1/sandboxes/../../etc/passwd"
                )
            ),
            (404, error("NOT_FOUND", "no route for GET /api/v1/nowhere")),
            (
                405,
                error("METHOD_NOT_ALLOWED", "PUT is not allowed on /api/v1/health")
            ),
        ]
    );
}

#[tokio::test]
async fn file_errors_inside_a_live_sandbox_are_not_404() {
    let ctx = Ctx::new(|_| {}).await;
    let id = ctx.spawn().await;
    let (status, body) = ctx
        .send(
            "GET",
            &format!("/api/v1/sandboxes/{id}/files?path=/workspace/missing"),
            "",
        )
        .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::BAD_REQUEST,
            error(
                "BAD_REQUEST",
                "/workspace/missing: no such file or directory"
            )
        )
    );
    let (status, body) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/files"),
            r#"{"path":"/usr/evil","content":"x"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("writable paths: /workspace"),
        "{body}"
    );
    // Once destroyed, everything about it is 404 (and destroying again is still 200).
    assert_eq!(
        ctx.send("DELETE", &format!("/api/v1/sandboxes/{id}"), "")
            .await,
        (StatusCode::OK, json!({"status": "destroyed"}))
    );
    assert_eq!(
        ctx.send("DELETE", &format!("/api/v1/sandboxes/{id}"), "")
            .await,
        (StatusCode::OK, json!({"status": "destroyed"}))
    );
    let (status, _) = ctx
        .send(
            "GET",
            &format!("/api/v1/sandboxes/{id}/files?path=/workspace"),
            "",
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn oversized_bodies_are_refused_with_413() {
    let ctx = Ctx::new(|c| c.max_body_bytes = 1024).await;
    let id = ctx.spawn().await;
    let content = "x".repeat(4096);
    let (status, body) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/files"),
            &json!({"path": "big", "content": content}).to_string(),
        )
        .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            error(
                "TOO_LARGE",
                "request body is larger than the server accepts"
            )
        )
    );
}

#[tokio::test]
async fn the_api_key_guards_the_api_but_not_the_docs() {
    let ctx = Ctx::new(|c| c.api_key = Some("0123456789abcdef-key".into())).await;
    let without = Request::get("/api/v1/health")
        .header("x-request-id", "abc")
        .body(Body::empty())
        .unwrap();
    let response = app(ctx.state.clone()).oneshot(without).await.unwrap();
    assert_eq!(
        (
            response.status(),
            response.headers()["x-request-id"].to_str().unwrap()
        ),
        (StatusCode::UNAUTHORIZED, "abc")
    );
    let with = Request::get("/api/v1/health")
        .header("x-api-key", "0123456789abcdef-key")
        .body(Body::empty())
        .unwrap();
    assert_eq!(ctx.call(with).await.0, StatusCode::OK);
    let bearer = Request::get("/metrics")
        .header("authorization", "Bearer 0123456789abcdef-key")
        .body(Body::empty())
        .unwrap();
    let (status, text) = ctx.call(bearer).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.as_str().unwrap().contains("forge_sandboxes_active 0"),
        "{text}"
    );
    let preflight = Request::options("/api/v1/sandboxes")
        .header("origin", "http://example.test")
        .header("access-control-request-method", "POST")
        .body(Body::empty())
        .unwrap();
    assert_eq!(ctx.call(preflight).await.0, StatusCode::OK);
    assert_eq!(
        ctx.send("GET", "/api/v1/openapi.json", "").await.0,
        StatusCode::OK
    );
    assert_eq!(ctx.send("GET", "/api/v1/docs/", "").await.0, StatusCode::OK);
}

#[tokio::test]
async fn templates_round_trip_and_spawn() {
    let ctx = Ctx::new(|c| c.max_sandboxes = None).await;
    let template = json!({"name": "py", "image": "host", "memory_mb": 256, "setup": ["echo ready > /workspace/setup-ran"], "env": {"GREETING": "hi"}});
    let (status, created) = ctx
        .send("POST", "/api/v1/templates", &template.to_string())
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        (
            created["version"].clone(),
            created["cpu_cores"].clone(),
            created["ttl_seconds"].clone(),
            created["pool_size"].clone()
        ),
        (json!(1), json!(1), json!(300), json!(0))
    );
    assert_eq!(
        ctx.send("POST", "/api/v1/templates", &template.to_string())
            .await,
        (
            StatusCode::CONFLICT,
            error("CONFLICT", "template \"py\" already exists")
        )
    );
    let (status, sandbox) = ctx.send("POST", "/api/v1/templates/py/spawn", "").await;
    assert_eq!(status, StatusCode::CREATED, "{sandbox}");
    assert_eq!(
        (sandbox["memory_mb"].clone(), sandbox["metadata"].clone()),
        (json!(256), json!({"template": "py"}))
    );
    let id = sandbox["id"].as_str().unwrap();
    let (_, ran) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/exec"),
            r#"{"command":"cat /workspace/setup-ran; echo $GREETING"}"#,
        )
        .await;
    assert_eq!(ran["stdout"], "ready\nhi\n");
    let (status, updated) = ctx
        .send(
            "PUT",
            "/api/v1/templates/py",
            r#"{"image":"host","memory_mb":128}"#,
        )
        .await;
    assert_eq!(
        (
            status,
            updated["version"].clone(),
            updated["memory_mb"].clone()
        ),
        (StatusCode::OK, json!(2), json!(128))
    );
    assert_eq!(
        ctx.send("DELETE", "/api/v1/templates/py", "").await,
        (StatusCode::OK, json!({"status": "deleted"}))
    );
    assert_eq!(
        ctx.send("POST", "/api/v1/templates/py/spawn", "").await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        ctx.send("GET", "/api/v1/pool/status", "").await,
        (StatusCode::OK, json!({"enabled": false}))
    );
}

#[tokio::test]
async fn a_template_pool_keeps_warm_sandboxes_ready() {
    let ctx = Ctx::new(|_| {}).await;
    let template = json!({"name": "warm", "image": "host", "pool_size": 2, "setup": ["touch /workspace/prepared"]});
    assert_eq!(
        ctx.send("POST", "/api/v1/templates", &template.to_string())
            .await
            .0,
        StatusCode::CREATED
    );
    let mut ready = 0;
    for _ in 0..200 {
        let (_, pool) = ctx.send("GET", "/api/v1/pool/status", "").await;
        ready = pool["warm"]["warm"].as_u64().unwrap_or(0);
        if ready == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(ready, 2);
    let (_, sandbox) = ctx.send("POST", "/api/v1/templates/warm/spawn", "").await;
    let id = sandbox["id"].as_str().unwrap();
    let (_, listed) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/exec"),
            r#"{"command":"ls /workspace"}"#,
        )
        .await;
    assert_eq!(listed["stdout"], "prepared\n");
    ctx.state.manager().shutdown_pools().await;
}

#[tokio::test]
async fn background_processes_over_http() {
    let ctx = Ctx::new(|_| {}).await;
    let id = ctx.spawn().await;
    let (status, process) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/processes"),
            r#"{"command":"read line; echo got $line","tag":"reader"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{process}");
    let pid = process["id"].as_u64().unwrap();
    let base = format!("/api/v1/sandboxes/{id}/processes/{pid}");
    assert_eq!(
        ctx.send(
            "POST",
            &format!("{base}/stdin"),
            r#"{"data":"hello\n","close":true}"#
        )
        .await
        .0,
        StatusCode::OK
    );
    let (_, done) = ctx
        .send("POST", &format!("{base}/wait?timeout_ms=10000"), "")
        .await;
    assert_eq!(
        (done["state"].clone(), done["exit_code"].clone()),
        (json!("exited"), json!(0))
    );
    let (_, logs) = ctx.send("GET", &format!("{base}/logs?cursor=0"), "").await;
    assert_eq!(
        (logs["chunks"].clone(), logs["next_cursor"].clone()),
        (
            json!([{"stream": "stdout", "data": "got hello\n"}]),
            json!(10)
        )
    );
    assert_eq!(
        ctx.send("GET", &format!("/api/v1/sandboxes/{id}/processes/77"), "")
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (status, body) = ctx
        .send("POST", &format!("{base}/signal"), r#"{"signal":"BOGUS"}"#)
        .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::BAD_REQUEST,
            error("BAD_REQUEST", "invalid signal: unknown signal \"BOGUS\"")
        )
    );
}

#[tokio::test]
async fn exec_results_follow_forgevm_and_add_forge_fields() {
    let ctx = Ctx::new(|_| {}).await;
    let id = ctx.spawn().await;
    let (status, result) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/exec"),
            r#"{"command":"printf %s","args":["a b"],"workdir":"/tmp","env":{"X":"1"}}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut result = result;
    result["duration"] = json!("…");
    assert_eq!(
        result,
        json!({"exit_code": 0, "stdout": "a b", "stderr": "", "duration": "…", "timed_out": false, "oom_killed": false, "stdout_truncated": false, "stderr_truncated": false})
    );
    let (_, killed) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/exec"),
            r#"{"command":"sleep 30","timeout":"200ms"}"#,
        )
        .await;
    assert_eq!(
        (
            killed["exit_code"].clone(),
            killed["signal"].clone(),
            killed["timed_out"].clone()
        ),
        (json!(-1), json!(9), json!(true))
    );
    ctx.state.flush().await;
    let (_, logs) = ctx
        .send("GET", &format!("/api/v1/sandboxes/{id}/logs"), "")
        .await;
    let lines: Vec<&str> = logs
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].contains("exec \"sleep 30\" exit 137") && lines[1].ends_with("(timed out)"),
        "{lines:?}"
    );
}
