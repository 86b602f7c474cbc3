//! Integration tests of the jail backend: real namespaces, cgroups, seccomp and Landlock,
//! attacked for real. They run as root, as in CI; `unprivileged` re-runs part of the suite
//! as an ordinary user to check the user-namespace-only mode.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

mod confinement;
mod exec;
mod files;
mod images;
mod lifecycle;
mod network;
mod processes;
mod unprivileged;

use forge_sandbox::{Backend, JailBackend, JailConfig};
use forge_types::{ExecRequest, ExecResult, SandboxId, SandboxSpec};

forge_test_support::sandbox_helper!();

/// A backend on a fresh data directory.
struct Ctx {
    dir: forge_test_support::DataDir,
    backend: JailBackend,
}

impl Ctx {
    fn new() -> Self {
        let dir = forge_test_support::data_dir();
        let backend = JailBackend::new(Self::config(dir.path())).expect("jail backend");
        Self { dir, backend }
    }

    /// A config whose cgroups live in their own directory, so leak checks see only this
    /// test's sandboxes.
    fn config(dir: &std::path::Path) -> JailConfig {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("forge-test");
        JailConfig {
            cgroup_name: name.to_owned(),
            // Tests never reach out to public registries.
            registries: forge_image::RegistryConfig {
                pull_missing: false,
                ..forge_image::RegistryConfig::default()
            },
            ..JailConfig::new(dir)
        }
    }

    async fn sandbox(&self) -> SandboxId {
        self.sandbox_with(SandboxSpec::default()).await
    }

    async fn sandbox_with(&self, spec: SandboxSpec) -> SandboxId {
        self.backend.create(spec).await.expect("create sandbox").id
    }

    async fn sh(&self, id: &SandboxId, script: &str) -> ExecResult {
        self.backend
            .exec(id, ExecRequest::shell(script))
            .await
            .expect("exec")
    }

    /// Runs a script and returns its stdout, asserting it succeeded.
    async fn ok(&self, id: &SandboxId, script: &str) -> String {
        let result = self.sh(id, script).await;
        assert_eq!(
            (
                result.exit_code,
                String::from_utf8_lossy(&result.stderr).into_owned()
            ),
            (0, String::new()),
            "{script}"
        );
        String::from_utf8(result.stdout).expect("utf-8 output")
    }
}

/// Output as text, for assertions.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
