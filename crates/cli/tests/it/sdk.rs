//! ForgeVM's own Python SDK (`forgevm` 0.1.2 from the Python package registry) against a
//! live `forge serve`: the acceptance suite in `tests/sdk/`, sync and async.

use std::path::{Path, PathBuf};

use forge_test_support::oci::{Layer, Registry, TestImage};

use crate::server::{KEY, Server};

/// A virtualenv with the suite's requirements, made once per target directory (or the
/// interpreter named by `FORGE_SDK_PYTHON`).
fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("FORGE_SDK_PYTHON") {
        return PathBuf::from(python);
    }
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/requirements.txt");
    crate::python::venv("forgevm-sdk-venv", &requirements)
}

#[tokio::test]
async fn the_forgevm_python_sdk_passes_its_acceptance_suite() {
    let python = tokio::task::spawn_blocking(python).await.unwrap();
    let data = forge_test_support::data_dir();
    // The SDK's default image, alpine:latest, comes from a registry mirror of docker.io
    // holding a busybox image the test builds (this machine reaches no public registry).
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    TestImage::new(vec![
        Layer::busybox()
            .file("etc/alpine-release", "3.20.0\n")
            .dir("workspace", 0o755),
    ])
    .write_oci_layout(layout.path(), "latest");
    registry.push(layout.path(), "latest", "library/alpine");
    let config = data.path().join("forge.toml");
    std::fs::write(
        &config,
        format!(
            "[images.mirrors]\n\"docker.io\" = [\"{}\"]\n",
            registry.address
        ),
    )
    .unwrap();
    let server = Server::start(
        data.path(),
        Some(KEY),
        &["--config", config.to_str().unwrap()],
    )
    .await;
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    let output = tokio::process::Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs"])
        .arg(&suite)
        .current_dir(&suite)
        .env("FORGE_URL", &server.url)
        .env("FORGE_API_KEY", KEY)
        .env("FORGE_IMAGES_MIRROR", &registry.address)
        .output()
        .await
        .unwrap();
    let report = crate::python::report(&output);
    server.stop().await;
    assert!(output.status.success(), "the SDK suite failed:\n{report}");
    assert!(
        report.contains("passed") && !report.contains(" failed") && !report.contains("skipped"),
        "every test runs here, the image tests included:\n{report}"
    );
}
