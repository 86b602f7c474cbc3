//! The tool gateway's routes through `app(state)`: sessions, tool calls and their status
//! codes, the ledger behind the API key.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::Ctx;

async fn gateway_ctx() -> Ctx {
    Ctx::new(|config| {
        config.gateway_ceilings.max_execution_seconds = 5;
    })
    .await
}

async fn open(ctx: &Ctx, policy: Value) -> String {
    let (status, body) = ctx
        .send(
            "POST",
            "/api/v1/sessions",
            &json!({ "policy": policy }).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

async fn tool(ctx: &Ctx, session: &str, tool: &str, arguments: Value) -> (StatusCode, Value) {
    ctx.send(
        "POST",
        &format!("/api/v1/tools/{tool}"),
        &json!({ "session_id": session, "arguments": arguments }).to_string(),
    )
    .await
}

#[tokio::test]
async fn sessions_and_tool_calls_over_http() {
    let ctx = gateway_ctx().await;
    let (status, created) = ctx
        .send(
            "POST",
            "/api/v1/sessions",
            r#"{"policy": {"max_execution_seconds": 999, "shell": true}}"#,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    // Narrowed by the operator's ceilings.
    assert_eq!(
        (
            created["policy"]["max_execution_seconds"].clone(),
            created["policy"]["shell"].clone(),
            created["state"].clone()
        ),
        (json!(5), json!(false), json!("open"))
    );
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, got) = ctx.send("GET", &format!("/api/v1/sessions/{id}"), "").await;
    assert_eq!((status, got["id"].clone()), (StatusCode::OK, json!(id)));

    let (status, written) = tool(
        &ctx,
        &id,
        "write_file",
        json!({"path": "a.txt", "content": "hi"}),
    )
    .await;
    assert_eq!(
        (
            status,
            written["outcome"].clone(),
            written["result"].clone()
        ),
        (
            StatusCode::OK,
            json!("ok"),
            json!({"path": "/workspace/a.txt", "bytes": 2})
        )
    );
    let (status, ran) = tool(
        &ctx,
        &id,
        "run_code",
        json!({"language": "python", "code": "print(open('a.txt').read())"}),
    )
    .await;
    assert_eq!(
        (status, ran["result"]["stdout"].clone()),
        (StatusCode::OK, json!("hi\n"))
    );

    tool(
        &ctx,
        &id,
        "write_file",
        json!({"path": ".env", "content": "K=v"}),
    )
    .await;
    let (status, denied) = tool(&ctx, &id, "read_file", json!({"path": ".env"})).await;
    assert_eq!(
        (
            status,
            denied["code"].clone(),
            denied["decision"].clone(),
            denied["rule"].clone()
        ),
        (
            StatusCode::FORBIDDEN,
            json!("POLICY_DENIED"),
            json!("deny"),
            json!("secrets")
        )
    );
    let (status, invalid) = tool(&ctx, &id, "read_file", json!({"path": 7})).await;
    assert_eq!(
        (status, invalid["code"].clone(), invalid["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("BAD_REQUEST"), json!("path"))
    );

    let (status, listed) = ctx
        .send("GET", &format!("/api/v1/tools?session={id}"), "")
        .await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"run_code") && !names.contains(&"shell"),
        "{names:?}"
    );
    assert_eq!(listed[0]["input_schema"]["type"], json!("object"));

    let (status, ledger) = ctx
        .send("GET", &format!("/api/v1/ledger?session={id}&limit=10"), "")
        .await;
    let outcomes: Vec<(&str, &str)> = ledger
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["tool"].as_str().unwrap(), e["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        (status, outcomes),
        (
            StatusCode::OK,
            vec![
                ("write_file", "ok"),
                ("run_code", "ok"),
                ("write_file", "ok"),
                ("read_file", "denied"),
                ("read_file", "invalid"),
            ]
        )
    );

    let (status, reset) = ctx
        .send("POST", &format!("/api/v1/sessions/{id}/reset"), "")
        .await;
    assert_eq!(
        (status, reset["tool"].clone()),
        (StatusCode::OK, json!("session_reset"))
    );
    let (status, closed) = ctx
        .send("DELETE", &format!("/api/v1/sessions/{id}"), "")
        .await;
    assert_eq!(
        (status, closed["state"].clone()),
        (StatusCode::OK, json!("closed"))
    );
    let (status, gone) = tool(&ctx, &id, "list_directory", json!({})).await;
    assert_eq!(
        (status, gone["code"].clone()),
        (StatusCode::NOT_FOUND, json!("NOT_FOUND"))
    );
}

#[tokio::test]
async fn unknown_sessions_asks_and_bad_policies() {
    let ctx = gateway_ctx().await;
    let (status, body) = tool(&ctx, "ses-000000000000", "list_directory", json!({})).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"code": "NOT_FOUND", "message": "session \"ses-000000000000\" not found"})
        )
    );
    let (status, body) = ctx.send("GET", "/api/v1/sessions/../etc", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = ctx
        .send(
            "POST",
            "/api/v1/sessions",
            r#"{"policy": {"tools": ["read_flie"]}}"#,
        )
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("BAD_REQUEST")),
        "{body}"
    );

    let id = open(
        &ctx,
        json!({"rules": [{"id": "ask-delete", "decision": "ask", "tool": "delete_path", "reason": "a person confirms"}]}),
    )
    .await;
    let (status, body) = tool(&ctx, &id, "delete_path", json!({"path": "x"})).await;
    assert_eq!(
        (status, body["code"].clone(), body["rule"].clone()),
        (
            StatusCode::CONFLICT,
            json!("APPROVAL_REQUIRED"),
            json!("ask-delete")
        )
    );
}

#[tokio::test]
async fn the_ledger_needs_the_api_key() {
    let key = "a-key-of-sixteen-chars";
    let ctx = Ctx::new(|config| config.api_key = Some(key.to_owned())).await;
    let anonymous = Request::builder()
        .uri("/api/v1/ledger")
        .body(Body::empty())
        .unwrap();
    let (status, _) = ctx.call(anonymous).await;
    let keyed = Request::builder()
        .uri("/api/v1/ledger")
        .header("x-api-key", key)
        .body(Body::empty())
        .unwrap();
    let (keyed_status, body) = ctx.call(keyed).await;
    assert_eq!(
        (status, keyed_status, body),
        (StatusCode::UNAUTHORIZED, StatusCode::OK, json!([]))
    );
}
