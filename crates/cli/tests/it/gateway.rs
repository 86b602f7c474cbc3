//! `forge tools` and `forge ledger` against a real `forge serve`, and `forge ledger verify`
//! on the data directory it leaves behind.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::server::{KEY, Server};

fn forge(args: &[&str], url: &str) -> (Option<i32>, String, String) {
    #[expect(
        clippy::disallowed_methods,
        reason = "runs the forge binary under test"
    )]
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_forge"))
        .args(args)
        .env("FORGE_URL", url)
        .env("FORGE_API_KEY", KEY)
        .env_remove("FORGE_DATA_DIR")
        .env_remove("FORGE_CONFIG")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn tools_and_the_ledger_from_the_command_line() {
    let data = forge_test_support::data_dir();
    let server = Server::start(data.path(), Some(KEY), &[]).await;
    let (status, session) = server.post("/sessions", &json!({})).await;
    assert_eq!(status, 201, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    let url = server.url.clone();

    let (code, listed, _) = forge(&["tools", "ls", "--session", &id, "--json"], &url);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(code, Some(0));
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == json!("read_file"))
    );

    let call = |tool: &str, args: &str| {
        forge(
            &["tools", "call", tool, "--session", &id, "--args", args],
            &url,
        )
    };
    let write = call("write_file", r#"{"path": "a.txt", "content": "hello"}"#);
    assert_eq!(write.0, Some(0), "{write:?}");
    let (code, read, _) = call("read_file", r#"{"path": "a.txt"}"#);
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!((code, read["content"].clone()), (Some(0), json!("hello")));
    let (code, _, stderr) = call("write_file", r#"{"path": "/etc/x", "content": "x"}"#);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("paths.writable"), "{stderr}");

    let (code, tail, _) = forge(
        &["ledger", "tail", "--session", &id, "-n", "2", "--json"],
        &url,
    );
    let tail: Value = serde_json::from_str(&tail).unwrap();
    let tools: Vec<(&str, &str)> = tail
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["tool"].as_str().unwrap(), e["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        (code, tools),
        (Some(0), vec![("read_file", "ok"), ("write_file", "denied")])
    );
    server.stop().await;

    let dir = data.path().to_str().unwrap();
    let (code, out, _) = forge(&["ledger", "verify", "--data-dir", dir], &url);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("ledger intact: 3 lines"), "{out}");

    let ledger = data.path().join("ledger.jsonl");
    let text = std::fs::read_to_string(&ledger).unwrap();
    std::fs::write(
        &ledger,
        text.replacen("\"read_file\"", "\"list_directory\"", 1),
    )
    .unwrap();
    let (code, _, stderr) = forge(&["ledger", "verify", "--data-dir", dir], &url);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("ledger tampered at line 2"), "{stderr}");

    // Cutting the last line is caught against the store's record of it.
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&ledger, lines[..2].join("\n") + "\n").unwrap();
    let (code, _, stderr) = forge(&["ledger", "verify", "--data-dir", dir], &url);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("line 3"), "{stderr}");
}
