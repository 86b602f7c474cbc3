//! The gateway against a real jail backend and a real SQLite file: every tool, every policy
//! field enforced, the ledger and its tamper detection.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

mod files;
mod ledger;
mod policy;
mod processes;

use std::sync::Arc;

use forge_gateway::{Gateway, GatewayConfig, SessionRequest, ToolReply};
use forge_policy::{Ceilings, Policy};
use forge_sandbox::{JailBackend, JailConfig};
use serde_json::Value;

forge_test_support::sandbox_helper!();

/// A gateway on a fresh data directory.
struct Ctx {
    dir: forge_test_support::DataDir,
    backend: Arc<JailBackend>,
    store: forge_store::Store,
    gateway: Gateway,
}

/// Sandboxes outlive a dropped backend on purpose (a restarted server adopts them), so a
/// test's sessions that were not closed would leave their inits running: kill them.
impl Drop for Ctx {
    fn drop(&mut self) {
        use forge_sandbox::Backend;
        // `list` reads the backend's table without waiting on anything: one poll finishes it.
        let mut list = std::pin::pin!(self.backend.list());
        let mut poll = std::task::Context::from_waker(std::task::Waker::noop());
        let std::task::Poll::Ready(sandboxes) = list.as_mut().poll(&mut poll) else {
            return;
        };
        let pids: Vec<String> = sandboxes.iter().map(|s| s.init_pid.to_string()).collect();
        if pids.is_empty() {
            return;
        }
        #[expect(
            clippy::disallowed_methods,
            reason = "kills the test's leftover sandbox inits"
        )]
        let _ = std::process::Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .status();
    }
}

impl Ctx {
    async fn new() -> Self {
        Self::with_ceilings(Ceilings::default()).await
    }

    async fn with_ceilings(ceilings: Ceilings) -> Self {
        let dir = forge_test_support::data_dir();
        let name = dir
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("forge-test")
            .to_owned();
        let backend = Arc::new(
            JailBackend::new(JailConfig {
                cgroup_name: name,
                registries: forge_image::RegistryConfig {
                    pull_missing: false,
                    ..forge_image::RegistryConfig::default()
                },
                ..JailConfig::new(dir.path())
            })
            .expect("jail backend"),
        );
        let store = forge_store::Store::open(&dir.path().join("forge.db"))
            .await
            .unwrap();
        let mut config = GatewayConfig::new(dir.path());
        config.ceilings = ceilings;
        let gateway = Gateway::new(backend.clone(), store.clone(), config);
        Self {
            dir,
            backend,
            store,
            gateway,
        }
    }

    /// A session under `policy` (TOML), or the default policy for "".
    async fn session(&self, policy: &str) -> String {
        let policy = if policy.is_empty() {
            None
        } else {
            Some(Policy::from_toml(policy).unwrap())
        };
        self.gateway
            .create_session(SessionRequest {
                policy,
                sandbox_id: None,
            })
            .await
            .unwrap()
            .id
            .to_string()
    }

    async fn call(&self, session: &str, tool: &str, arguments: Value) -> ToolReply {
        self.gateway
            .call(session, tool, arguments, None)
            .await
            .unwrap()
    }

    /// A call that must succeed; returns its result.
    async fn ok(&self, session: &str, tool: &str, arguments: Value) -> Value {
        let reply = self.call(session, tool, arguments).await;
        assert_eq!(
            reply.outcome,
            forge_gateway::Outcome::Ok,
            "{tool}: {}",
            reply.text()
        );
        reply.result
    }

    fn ledger_path(&self) -> std::path::PathBuf {
        GatewayConfig::ledger_path(self.dir.path())
    }
}

/// `(outcome, decision, rule, error field)` of a reply, for whole-value assertions.
fn verdict(reply: &ToolReply) -> (String, Option<String>, Option<String>, Option<String>) {
    (
        reply.outcome.as_str().to_owned(),
        reply.decision.map(|d| d.as_str().to_owned()),
        reply.rule.clone(),
        reply.error.as_ref().and_then(|e| e.field.clone()),
    )
}

fn v(
    outcome: &str,
    decision: Option<&str>,
    rule: Option<&str>,
    field: Option<&str>,
) -> (String, Option<String>, Option<String>, Option<String>) {
    (
        outcome.to_owned(),
        decision.map(str::to_owned),
        rule.map(str::to_owned),
        field.map(str::to_owned),
    )
}
