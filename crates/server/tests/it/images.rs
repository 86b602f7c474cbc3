//! The image routes, snapshots and forks through `app(state)`, with a real registry on
//! loopback and archives written by the test.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use forge_test_support::oci::{self, Layer, Registry, TestImage};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{Ctx, error};

fn app_image() -> TestImage {
    TestImage::new(vec![
        Layer::busybox().file("etc/app.conf", "v1"),
        Layer::new()
            .whiteout("etc/app.conf")
            .file("etc/added", "added"),
        Layer::new().file("srv/data", "data"),
    ])
}

impl Ctx {
    async fn sh(&self, id: &str, script: &str) -> Value {
        let body = json!({"command": "sh", "args": ["-c", script]}).to_string();
        let (status, result) = self
            .send("POST", &format!("/api/v1/sandboxes/{id}/exec"), &body)
            .await;
        assert_eq!(status, StatusCode::OK, "{result}");
        result
    }

    async fn raw(&self, method: &str, path: &str, body: Vec<u8>) -> (StatusCode, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let (status, value) = self.call(request).await;
        let text = match value {
            Value::String(text) => text,
            other => other.to_string(),
        };
        (status, text)
    }
}

#[tokio::test]
async fn images_are_pulled_listed_and_removed_over_http() {
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    app_image().write_oci_layout(layout.path(), "1");
    registry.push(layout.path(), "1", "team/app");
    let ctx = Ctx::new(|_| {}).await;
    let name = format!("{}/team/app:1", registry.address);

    let pull = json!({"reference": name}).to_string();
    let (status, image) = ctx.send("POST", "/api/v1/images/pull", &pull).await;
    assert_eq!(status, StatusCode::OK, "{image}");
    assert_eq!(
        (
            &image["name"],
            &image["layers"],
            &image["source"],
            &image["origin"]
        ),
        (
            &json!(name),
            &json!(3),
            &json!("registry"),
            &json!(registry.address)
        )
    );

    // Pulled again with progress: every layer is already there, the last line says done.
    let (status, text) = ctx
        .raw(
            "POST",
            "/api/v1/images/pull?stream=true",
            pull.clone().into_bytes(),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "resolved",
            "layer_cached",
            "layer_cached",
            "layer_cached",
            "done"
        ]
    );
    assert_eq!(events[4]["image"]["id"], image["id"]);

    let (_, listed) = ctx.send("GET", "/api/v1/images", "").await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["host", name.as_str()]);
    let (status, one) = ctx.send("GET", &format!("/api/v1/images/{name}"), "").await;
    assert_eq!((status, &one["id"]), (StatusCode::OK, &image["id"]));

    // A sandbox on it: its image cannot go, unless forced.
    let spawn = json!({"image": name}).to_string();
    let (status, sandbox) = ctx.send("POST", "/api/v1/sandboxes", &spawn).await;
    assert_eq!(status, StatusCode::CREATED, "{sandbox}");
    let id = sandbox["id"].as_str().unwrap();
    let out = ctx
        .sh(
            id,
            "cat /etc/added /srv/data; test -e /etc/app.conf || echo gone",
        )
        .await;
    assert_eq!(out["stdout"], "addeddatagone\n");
    let (status, refused) = ctx
        .send("DELETE", &format!("/api/v1/images/{name}"), "")
        .await;
    assert_eq!(
        (status, refused),
        (
            StatusCode::CONFLICT,
            error(
                "CONFLICT",
                &format!("image {name} is in use by {id}; destroy those first or pass --force")
            )
        )
    );
    let (status, removed) = ctx
        .send("DELETE", &format!("/api/v1/images/{name}?force=true"), "")
        .await;
    assert_eq!(
        (status, removed),
        (
            StatusCode::OK,
            json!({"images": [name], "layers": 0, "freed_bytes": 0})
        )
    );
    assert_eq!(ctx.sh(id, "cat /srv/data").await["stdout"], "data");
    let (status, _) = ctx
        .send("DELETE", &format!("/api/v1/images/{name}"), "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Bad references, missing tags and dead registries answer differently.
    let closed = format!("127.0.0.1:{}", oci::free_port());
    let cases = [
        (
            json!({"reference": "Team/UPPER:1"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"reference": format!("{}/team/none:1", registry.address)}),
            StatusCode::NOT_FOUND,
        ),
        (
            json!({"reference": format!("{closed}/team/app:1")}),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        (json!({"image": "typo"}), StatusCode::BAD_REQUEST),
    ];
    for (body, want) in cases {
        let (status, answer) = ctx
            .send("POST", "/api/v1/images/pull", &body.to_string())
            .await;
        assert_eq!(status, want, "{body}: {answer}");
        assert!(answer["message"].is_string(), "{answer}");
    }
}

#[tokio::test]
async fn archives_import_and_sandboxes_snapshot_and_fork_over_http() {
    let ctx = Ctx::new(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("app.tar");
    app_image().write_docker_archive(&archive, "example.com/app:2");
    let (status, text) = ctx
        .raw(
            "POST",
            "/api/v1/images/import",
            std::fs::read(&archive).unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let imported: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(imported[0]["name"], "example.com/app:2");
    assert_eq!(imported[0]["source"], "archive");
    for (body, want) in [
        (Vec::new(), "the body is empty: send the archive's bytes"),
        (b"junk".to_vec(), "not a readable tar archive"),
    ] {
        let (status, text) = ctx.raw("POST", "/api/v1/images/import", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(text.contains(want), "{text}");
    }

    let spawn = json!({"image": "example.com/app:2"}).to_string();
    let (_, sandbox) = ctx.send("POST", "/api/v1/sandboxes", &spawn).await;
    let id = sandbox["id"].as_str().unwrap().to_owned();
    ctx.sh(&id, "echo saved > /workspace/state").await;

    let (status, snapshot) = ctx
        .send(
            "POST",
            &format!("/api/v1/sandboxes/{id}/snapshot"),
            r#"{"name":"snaps/app:1"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{snapshot}");
    assert_eq!(
        (
            &snapshot["name"],
            &snapshot["layers"],
            &snapshot["parent"],
            &snapshot["origin"]
        ),
        (
            &json!("snaps/app:1"),
            &json!(4),
            &json!("example.com/app:2"),
            &json!(id)
        )
    );
    let (_, snapshots) = ctx.send("GET", "/api/v1/snapshots", "").await;
    assert_eq!(snapshots[0]["image"], "snaps/app:1");
    assert_eq!(snapshots[0]["provider"], "jail");
    let spawn = json!({"image": "snaps/app:1"}).to_string();
    let (_, restored) = ctx.send("POST", "/api/v1/sandboxes", &spawn).await;
    let restored = restored["id"].as_str().unwrap();
    assert_eq!(
        ctx.sh(restored, "cat /workspace/state").await["stdout"],
        "saved\n"
    );

    let (status, fork) = ctx
        .send("POST", &format!("/api/v1/sandboxes/{id}/fork"), "")
        .await;
    assert_eq!(status, StatusCode::CREATED, "{fork}");
    assert_eq!(fork["metadata"]["forked_from"], json!(id));
    let fork = fork["id"].as_str().unwrap();
    ctx.sh(fork, "echo fork > /workspace/state").await;
    assert_eq!(
        ctx.sh(&id, "cat /workspace/state").await["stdout"],
        "saved\n"
    );
    assert_eq!(
        ctx.sh(fork, "cat /workspace/state").await["stdout"],
        "fork\n"
    );

    for (path, body, status) in [
        (
            "/api/v1/sandboxes/sb-00000000/fork",
            "",
            StatusCode::NOT_FOUND,
        ),
        (
            "/api/v1/sandboxes/sb-00000000/snapshot",
            "",
            StatusCode::NOT_FOUND,
        ),
        (
            &format!("/api/v1/sandboxes/{id}/snapshot"),
            r#"{"name":"Bad Name"}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            &format!("/api/v1/sandboxes/{id}/fork"),
            r#"{"ttl":"soon"}"#,
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (got, answer) = ctx.send("POST", path, body).await;
        assert_eq!(got, status, "{path} {body}: {answer}");
    }
}
