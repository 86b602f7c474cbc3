//! Processes, probes of the sandbox's own ports, artifacts and reset.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{Ctx, v, verdict};

#[tokio::test]
async fn a_server_starts_answers_logs_and_stops() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "site/index.html", "content": "hello from the sandbox"}),
    )
    .await;
    let started = ctx
        .ok(
            &s,
            "start_process",
            json!({
                "name": "web",
                "repo_dir": "site",
                "command": ["python3", "-m", "http.server", "8080", "--bind", "127.0.0.1"],
                "port": 8080,
            }),
        )
        .await;
    assert_eq!(
        (started["name"].clone(), started["port"].clone()),
        (json!("web"), json!(8080))
    );
    let again = ctx
        .call(
            &s,
            "start_process",
            json!({"name": "web", "command": ["python3", "-m", "http.server"]}),
        )
        .await;
    assert_eq!(
        verdict(&again),
        v("failed", Some("allow"), Some("default"), Some("name"))
    );

    // Wait until the server listens (a bounded number of probes, not a timed assertion).
    let mut open = json!(false);
    for _ in 0..100 {
        open = ctx.ok(&s, "check_port", json!({"port": 8080})).await["open"].clone();
        if open == json!(true) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(open, json!(true));
    let health = ctx
        .ok(
            &s,
            "http_health_check",
            json!({"url": "http://127.0.0.1:8080/index.html"}),
        )
        .await;
    assert_eq!(
        (
            health["ok"].clone(),
            health["status_code"].clone(),
            health["body"].clone()
        ),
        (json!(true), json!(200), json!("hello from the sandbox"))
    );
    ctx.ok(
        &s,
        "write_file",
        json!({
            "path": "site/preview.html",
            "content": "<html><head><TITLE>\n  Forge\n  preview </TITLE></head><body>x</body></html>",
        }),
    )
    .await;
    let preview = ctx
        .ok(
            &s,
            "capture_preview_metadata",
            json!({"name": "web", "base_url": "http://127.0.0.1:8080/preview.html"}),
        )
        .await;
    // The health check above was logged before it was answered.
    let logged = preview["log_lines"]
        .as_array()
        .unwrap()
        .iter()
        .any(|line| line.as_str().unwrap().contains("GET /index.html"));
    assert_eq!(
        (
            preview["health"].clone(),
            preview["running"].clone(),
            logged,
        ),
        (
            json!({"ok": true, "status": 200, "title_hint": "Forge preview"}),
            json!(true),
            true
        ),
        "{preview}"
    );
    let unreachable = ctx
        .ok(
            &s,
            "capture_preview_metadata",
            json!({"name": "web", "base_url": "http://127.0.0.1:8081/"}),
        )
        .await;
    assert_eq!(
        unreachable["health"],
        json!({"ok": false, "error": "ConnectionRefusedError"})
    );
    let logs = ctx.ok(&s, "stream_logs", json!({"name": "web"})).await;
    assert!(
        logs["logs"].as_str().unwrap().contains("GET /index.html"),
        "{logs}"
    );
    let cursor = logs["next_cursor"].as_u64().unwrap();
    let later = ctx
        .ok(&s, "stream_logs", json!({"name": "web", "cursor": cursor}))
        .await;
    assert_eq!(later["logs"], json!(""));

    let stopped = ctx.ok(&s, "stop_process", json!({"name": "web"})).await;
    assert_eq!(stopped["stopped"], json!(true));
    let closed = ctx.ok(&s, "check_port", json!({"port": 8080})).await;
    assert_eq!(closed["open"], json!(false));
}

#[tokio::test]
async fn probes_never_leave_the_sandbox() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    let cases = [
        (
            "check_port",
            json!({"port": 22, "host": "10.0.0.1"}),
            "host",
        ),
        (
            "http_health_check",
            json!({"url": "http://169.254.169.254/latest/meta-data"}),
            "url",
        ),
        (
            "http_health_check",
            json!({"url": "http://user@127.0.0.1:80/"}),
            "url",
        ),
        (
            "http_health_check",
            json!({"url": "https://example.org/"}),
            "url",
        ),
        (
            "clone_repo",
            json!({"repo_url": "file:///etc", "target_dir": "x"}),
            "repo_url",
        ),
        (
            "capture_preview_metadata",
            json!({"name": "web", "base_url": "http://10.0.0.1:8080/"}),
            "base_url",
        ),
    ];
    let mut fields = Vec::new();
    for (tool, arguments, _) in &cases {
        let reply = ctx.call(&s, tool, arguments.clone()).await;
        fields.push(verdict(&reply));
    }
    assert_eq!(
        fields,
        cases
            .iter()
            .map(|(_, _, field)| v("invalid", None, None, Some(field)))
            .collect::<Vec<_>>()
    );
    // A session without network cannot clone or install.
    let clone = ctx
        .call(
            &s,
            "clone_repo",
            json!({"repo_url": "https://github.com/octocat/Hello-World", "target_dir": "hello"}),
        )
        .await;
    let install = ctx
        .call(
            &s,
            "install_package",
            json!({"ecosystem": "python", "package": "requests"}),
        )
        .await;
    assert_eq!(
        [verdict(&clone), verdict(&install)],
        [
            v("denied", Some("deny"), Some("network.destination"), None),
            v("denied", Some("deny"), Some("network.destination"), None),
        ]
    );
}

#[tokio::test]
async fn artifacts_are_exported_and_reset_wipes_the_session() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "out/report.txt", "content": "report"}),
    )
    .await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "out/data/x.csv", "content": "a,b"}),
    )
    .await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "out/.env", "content": "KEY=secret"}),
    )
    .await;
    let one = ctx
        .ok(
            &s,
            "export_artifact",
            json!({"source_path": "out/report.txt"}),
        )
        .await;
    assert_eq!(one, json!({"artifact": "report.txt", "bytes": 6}));
    let tree = ctx
        .ok(&s, "export_artifacts", json!({"source_dir": "out"}))
        .await;
    assert_eq!(
        tree,
        json!({"artifact_dir": "out", "file_count": 2, "bytes": 9, "skipped": ["/workspace/out/.env"], "truncated": false})
    );
    let listed: Vec<(String, u64)> = ctx
        .gateway
        .artifacts(&s)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.path, a.bytes))
        .collect();
    assert_eq!(
        listed,
        [
            ("out/data/x.csv".to_owned(), 3),
            ("out/report.txt".to_owned(), 6),
            ("report.txt".to_owned(), 6),
        ]
    );

    ctx.ok(&s, "start_process", json!({"name": "sleeper", "command": ["python3", "-m", "http.server", "8081", "--bind", "127.0.0.1"]})).await;
    let reset = ctx.gateway.reset(&s).await.unwrap();
    assert_eq!(
        reset.result,
        json!({"status": "active", "processes_stopped": 1, "entries_removed": 1})
    );
    let listing = ctx.ok(&s, "list_directory", json!({})).await;
    assert_eq!(listing["count"], json!(0));
    let logs = ctx.ok(&s, "stream_logs", json!({"name": "sleeper"})).await;
    assert_eq!(logs["running"], json!(false));
}

#[tokio::test]
async fn checkout_ref_switches_a_local_repository() {
    let ctx = Ctx::new().await;
    let s = ctx.session("commands = [[\"git\"]]").await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "repo/a.txt", "content": "one"}),
    )
    .await;
    let git = |args: &[&str]| {
        let mut command = vec![
            "git",
            "-C",
            "/workspace/repo",
            "-c",
            "user.name=forge",
            "-c",
            "user.email=forge@localhost",
        ];
        command.extend_from_slice(args);
        json!({ "command": command })
    };
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "."],
        &["commit", "-q", "-m", "one"],
        &["tag", "v1"],
    ] {
        let ran = ctx.ok(&s, "run_command", git(args)).await;
        assert_eq!(ran["exit_code"], json!(0), "{args:?}: {ran}");
    }
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "repo/a.txt", "content": "two"}),
    )
    .await;
    ctx.ok(&s, "run_command", git(&["commit", "-q", "-am", "two"]))
        .await;

    let checked = ctx
        .ok(&s, "checkout_ref", json!({"repo_dir": "repo", "ref": "v1"}))
        .await;
    assert_eq!(checked["ok"], json!(true), "{checked}");
    let read = ctx.ok(&s, "read_file", json!({"path": "repo/a.txt"})).await;
    assert_eq!(read["content"], json!("one"));
    let unknown = ctx
        .ok(
            &s,
            "checkout_ref",
            json!({"repo_dir": "repo", "ref": "no-such-ref"}),
        )
        .await;
    assert_eq!(unknown["ok"], json!(false));
}
