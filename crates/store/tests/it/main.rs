//! Integration tests of the store against real `SQLite` databases: in memory for the queries,
//! on disk for durability, reopening, and concurrency.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

mod connections;
mod durability;
mod events;
mod exec_log;
mod open;
mod sandboxes;
mod templates;

use std::collections::BTreeMap;

use forge_store::{NewEvent, NewExec, SandboxRecord, TemplateRecord};
use serde_json::json;

/// A running sandbox created at `created_at_ms` that expires at `expires_at_ms`.
fn sandbox(id: &str, created_at_ms: i64, expires_at_ms: i64) -> SandboxRecord {
    SandboxRecord {
        id: id.to_owned(),
        state: SandboxRecord::RUNNING.to_owned(),
        image: "alpine:3.20".to_owned(),
        provider: "jail".to_owned(),
        memory_mb: 512,
        vcpus: 1,
        owner_id: Some("agent-7".to_owned()),
        metadata: BTreeMap::from([
            ("purpose".to_owned(), "tests".to_owned()),
            ("quote".to_owned(), "say \"hi\"".to_owned()),
        ]),
        spec: json!({"image": "alpine:3.20", "limits": {"memory": "512M", "pids": 128}}),
        template: Some("python".to_owned()),
        created_at_ms,
        expires_at_ms,
        destroyed_at_ms: None,
        destroy_reason: None,
        init_pid: Some(4242),
    }
}

/// A template named `name` with every field set.
fn template(name: &str) -> TemplateRecord {
    TemplateRecord {
        name: name.to_owned(),
        version: 1,
        image: "python:3.12".to_owned(),
        description: Some(format!("the {name} template")),
        setup: vec![
            "pip install numpy".to_owned(),
            "mkdir -p /workspace/out".to_owned(),
        ],
        allowed_hosts: vec!["pypi.org".to_owned(), "files.pythonhosted.org".to_owned()],
        memory_mb: 1024,
        cpu_cores: 2,
        ttl_seconds: 600,
        env: BTreeMap::from([("PYTHONUNBUFFERED".to_owned(), "1".to_owned())]),
        secrets: json!({"OPENAI_API_KEY": {"from_env": "OPENAI_API_KEY"}}),
        pool_size: 3,
        created_at_ms: 1_000,
        updated_at_ms: 1_000,
    }
}

/// A finished command in `sandbox_id`.
fn exec(sandbox_id: &str, command: &str, started_at_ms: i64) -> NewExec {
    NewExec {
        sandbox_id: sandbox_id.to_owned(),
        command: command.to_owned(),
        exit_code: 0,
        signal: None,
        duration_us: 1_250,
        started_at_ms,
        timed_out: false,
        oom_killed: false,
        streamed: false,
    }
}

/// An event of `kind` about `sandbox_id` with a small payload.
fn event(kind: &str, sandbox_id: Option<&str>, timestamp_ms: i64) -> NewEvent {
    NewEvent {
        kind: kind.to_owned(),
        sandbox_id: sandbox_id.map(str::to_owned),
        timestamp_ms,
        data: Some(json!({"kind": kind, "at": timestamp_ms})),
    }
}
