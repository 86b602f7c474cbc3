//! The official MCP Python SDK (`mcp` 2.3.0 from the Python package registry) against Forge's
//! tool gateway: the suite in `tests/mcp/`, over stdio (the client starts `forge mcp`) and over
//! Streamable HTTP (`/mcp` on a live `forge serve` with an API key), with real sandboxes.

use std::path::{Path, PathBuf};

use crate::server::{KEY, Server};

/// A virtualenv with the suite's requirements (or the interpreter named by
/// `FORGE_MCP_PYTHON`).
fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("FORGE_MCP_PYTHON") {
        return PathBuf::from(python);
    }
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/requirements.txt");
    crate::python::venv("mcp-sdk-venv", &requirements)
}

#[tokio::test]
async fn the_mcp_python_sdk_uses_the_gateway_over_stdio_and_http() {
    let python = tokio::task::spawn_blocking(python).await.unwrap();
    let data = forge_test_support::data_dir();
    let server = Server::start(data.path(), Some(KEY), &[]).await;
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
    // `forge mcp` shares the server's data directory, as it would on a real machine.
    let output = tokio::process::Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs"])
        .arg(&suite)
        .current_dir(&suite)
        .env("FORGE_BIN", env!("CARGO_BIN_EXE_forge"))
        .env("FORGE_MCP_DATA_DIR", data.path())
        .env("FORGE_URL", &server.url)
        .env("FORGE_API_KEY", KEY)
        .output()
        .await
        .unwrap();
    let report = crate::python::report(&output);
    server.stop().await;
    assert!(output.status.success(), "the MCP suite failed:\n{report}");
    assert!(
        report.contains("16 passed") && !report.contains(" failed") && !report.contains("skipped"),
        "every test runs on both transports:\n{report}"
    );
}

/// `forge mcp` as a client sees it on the wire: JSON-RPC lines on stdout and nothing else,
/// and a session that ends with the process even when a signal ends it (clients stop their
/// servers with SIGTERM when they quit).
#[tokio::test]
async fn forge_mcp_speaks_only_json_on_stdout_and_closes_its_session_on_sigterm() {
    use std::io::{BufRead, Write};

    let data = forge_test_support::data_dir();
    #[expect(
        clippy::disallowed_methods,
        reason = "runs the forge binary under test"
    )]
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_forge"))
        .args(["mcp", "--data-dir"])
        .arg(data.path())
        .env("FORGE_LOG", "debug")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let messages = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt","content":"a"}}}"#,
    ];
    let replies = tokio::task::spawn_blocking(move || {
        for message in messages {
            writeln!(stdin, "{message}").unwrap();
        }
        stdin.flush().unwrap();
        // Two answers (to ids 1 and 2); every line must be a JSON-RPC message, even with
        // debug logging on.
        let mut replies = Vec::new();
        while replies.len() < 2 {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "stdout closed");
            let message: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|err| panic!("not JSON on stdout ({err}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            replies.push(message);
        }
        (replies, stdin)
    })
    .await
    .unwrap();
    let (replies, _stdin_kept_open) = replies;
    assert_eq!(
        (
            &replies[0]["result"]["serverInfo"]["name"],
            &replies[1]["result"]["isError"]
        ),
        (&serde_json::json!("forge"), &serde_json::json!(false))
    );
    let session = replies[1]["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status}");

    let server = Server::start(data.path(), None, &[]).await;
    let (code, info) = server.get(&format!("/sessions/{session}")).await;
    server.stop().await;
    assert_eq!(
        (code, &info["state"]),
        (200, &serde_json::json!("closed")),
        "{info}"
    );
}
