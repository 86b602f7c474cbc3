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
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    server.stop().await;
    assert!(output.status.success(), "the MCP suite failed:\n{report}");
    assert!(
        report.contains("16 passed") && !report.contains(" failed") && !report.contains("skipped"),
        "every test runs on both transports:\n{report}"
    );
}
