//! Every policy field, enforced against a real sandbox.

use forge_gateway::{GatewayError, Outcome, SessionRequest};
use forge_policy::{Ceilings, Policy};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{Ctx, v, verdict};

#[tokio::test]
async fn a_command_longer_than_max_execution_seconds_is_killed() {
    let ctx = Ctx::new().await;
    let s = ctx.session("max_execution_seconds = 1").await;
    let slow = ctx
        .ok(
            &s,
            "run_code",
            json!({"language": "python", "code": "import time; time.sleep(5); print('done')"}),
        )
        .await;
    assert_eq!(
        (slow["timed_out"].clone(), slow["stdout"].clone()),
        (json!(true), json!(""))
    );
    // Asking for more than the policy gives changes nothing.
    let asked = ctx
        .ok(&s, "run_code", json!({"language": "python", "code": "import time; time.sleep(5)", "timeout_seconds": 60}))
        .await;
    assert_eq!(asked["timed_out"], json!(true));
}

#[tokio::test]
async fn output_above_max_output_bytes_is_truncated() {
    let ctx = Ctx::new().await;
    let s = ctx.session("max_output_bytes = 1000").await;
    let loud = ctx
        .ok(
            &s,
            "run_code",
            json!({"language": "python", "code": "print('x' * 5000)"}),
        )
        .await;
    assert_eq!(loud["truncated"], json!(true));
    assert!(loud["stdout"].as_str().unwrap().len() <= 1000, "{loud}");

    ctx.ok(
        &s,
        "write_file",
        json!({"path": "big.txt", "content": "y".repeat(5000)}),
    )
    .await;
    let read = ctx.ok(&s, "read_file", json!({"path": "big.txt"})).await;
    assert_eq!(
        (read["truncated"].clone(), read["bytes"].clone()),
        (json!(true), json!(5000))
    );
    assert!(read["content"].as_str().unwrap().len() <= 1000);
}

#[tokio::test]
async fn a_denied_tool_is_denied_and_recorded() {
    let ctx = Ctx::new().await;
    let s = ctx
        .session("tools = [\"read_file\", \"list_directory\"]")
        .await;
    let denied = ctx
        .call(&s, "write_file", json!({"path": "a.txt", "content": "x"}))
        .await;
    assert_eq!(
        verdict(&denied),
        v("denied", Some("deny"), Some("tools.allowlist"), None)
    );
    let listed: Vec<String> = ctx
        .gateway
        .session_tools(&s)
        .await
        .unwrap()
        .into_iter()
        .map(|spec| spec.name)
        .collect();
    assert_eq!(listed, ["read_file", "list_directory"]);
    let ledger = ctx.gateway.ledger(Some(&s), 10).await.unwrap();
    let last = ledger.last().unwrap();
    assert_eq!(
        (
            last.tool.as_str(),
            last.outcome,
            last.rule.as_deref(),
            last.seq
        ),
        (
            "write_file",
            Outcome::Denied,
            Some("tools.allowlist"),
            denied.ledger_seq
        )
    );
}

#[tokio::test]
async fn the_call_budget_runs_out() {
    let ctx = Ctx::new().await;
    let s = ctx.session("call_budget = 2").await;
    let first = ctx.call(&s, "list_directory", json!({})).await;
    // An invalid call counts too.
    let second = ctx.call(&s, "list_directory", json!({"nope": 1})).await;
    let third = ctx.call(&s, "list_directory", json!({})).await;
    assert_eq!(
        [verdict(&first), verdict(&second), verdict(&third)],
        [
            v("ok", Some("allow"), Some("default"), None),
            v("invalid", None, None, Some("nope")),
            v("denied", Some("deny"), Some("budget"), None),
        ]
    );
    assert_eq!(ctx.gateway.session(&s).await.unwrap().calls, 3);
}

#[tokio::test]
async fn the_shell_is_off_by_default() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    let snippet = ctx
        .call(
            &s,
            "run_code",
            json!({"language": "shell", "code": "echo hi"}),
        )
        .await;
    let tool = ctx.call(&s, "shell", json!({"command": "echo hi"})).await;
    let wrapped = ctx
        .call(
            &s,
            "start_process",
            json!({"name": "x", "command": "sleep 100"}),
        )
        .await;
    let bash = ctx
        .call(
            &s,
            "run_command",
            json!({"command": ["bash", "-c", "echo hi"]}),
        )
        .await;
    assert_eq!(
        [
            verdict(&snippet),
            verdict(&tool),
            verdict(&wrapped),
            verdict(&bash)
        ],
        [
            v("denied", Some("deny"), Some("shell.disabled"), None),
            // The default tool list leaves the shell out, which decides first.
            v("denied", Some("deny"), Some("tools.allowlist"), None),
            v("denied", Some("deny"), Some("shell.disabled"), None),
            v("denied", Some("deny"), Some("shell.disabled"), None),
        ]
    );
    let names: Vec<String> = ctx
        .gateway
        .session_tools(&s)
        .await
        .unwrap()
        .into_iter()
        .map(|spec| spec.name)
        .collect();
    assert!(!names.contains(&"shell".to_owned()), "{names:?}");

    // Where the operator and the client both allow it, the shell works.
    let open = Ctx::with_ceilings(Ceilings {
        shell: true,
        ..Ceilings::default()
    })
    .await;
    let s = open
        .session("shell = true\ntools = [\"*\"]\nrun_code_languages = [\"python\", \"shell\"]")
        .await;
    let ran = open
        .ok(&s, "shell", json!({"command": "echo hi | tr a-z A-Z"}))
        .await;
    assert_eq!(ran["stdout"], json!("HI\n"));
}

#[tokio::test]
async fn commands_follow_the_allowlist() {
    let ctx = Ctx::new().await;
    let s = ctx.session("commands = [[\"python3\", \"-c\"]]").await;
    let allowed = ctx
        .ok(
            &s,
            "run_command",
            json!({"command": ["python3", "-c", "print(6 * 7)"]}),
        )
        .await;
    assert_eq!(
        (allowed["exit_code"].clone(), allowed["stdout"].clone()),
        (json!(0), json!("42\n"))
    );
    let other = ctx
        .call(
            &s,
            "run_command",
            json!({"command": ["rm", "-rf", "/workspace"]}),
        )
        .await;
    assert_eq!(
        verdict(&other),
        v("denied", Some("deny"), Some("commands.allowlist"), None)
    );
}

#[tokio::test]
async fn an_ask_rule_leaves_the_call_pending_and_recorded() {
    let ctx = Ctx::new().await;
    let s = ctx
        .session(
            r#"
            [[rules]]
            id = "ask-before-delete"
            decision = "ask"
            tool = "delete_path"
            reason = "a person confirms deletions"
            "#,
        )
        .await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "keep.txt", "content": "x"}),
    )
    .await;
    let pending = ctx
        .call(&s, "delete_path", json!({"path": "keep.txt"}))
        .await;
    assert_eq!(
        verdict(&pending),
        v("pending", Some("ask"), Some("ask-before-delete"), None)
    );
    // Nothing ran.
    ctx.ok(&s, "read_file", json!({"path": "keep.txt"})).await;
}

#[tokio::test]
async fn invalid_arguments_name_the_field_and_are_recorded() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    let cases = [
        ("read_file", json!({})),
        ("read_file", json!({"path": 3})),
        (
            "write_file",
            json!({"path": "a", "content": "x", "mode": 1}),
        ),
        ("run_code", json!({"language": "ruby", "code": "puts 1"})),
        ("write_env_file", json!({"env": {"BAD KEY": "x"}})),
        (
            "checkout_ref",
            json!({"repo_dir": ".", "ref": "--upload-pack=evil"}),
        ),
        ("no_such_tool", json!({})),
    ];
    let mut fields = Vec::new();
    for (tool, arguments) in cases {
        let reply = ctx.call(&s, tool, arguments).await;
        assert_eq!(reply.outcome, Outcome::Invalid, "{tool}: {}", reply.text());
        fields.push(reply.error.unwrap().field.unwrap());
    }
    assert_eq!(
        fields,
        [
            "path",
            "path",
            "mode",
            "language",
            "env.BAD KEY",
            "ref",
            "tool"
        ]
    );
    let ledger = ctx.gateway.ledger(Some(&s), 100).await.unwrap();
    assert_eq!(ledger.len(), 7);
    assert!(
        ledger
            .iter()
            .all(|entry| entry.outcome == Outcome::Invalid && entry.decision.is_none())
    );
}

#[tokio::test]
async fn ceilings_narrow_what_a_client_asks_for() {
    let ctx = Ctx::with_ceilings(Ceilings {
        max_execution_seconds: 5,
        max_output_bytes: 4096,
        ..Ceilings::default()
    })
    .await;
    let info = ctx
        .gateway
        .create_session(SessionRequest {
            policy: Some(
                Policy::from_toml("max_execution_seconds = 1000000\nshell = true").unwrap(),
            ),
            sandbox_id: None,
        })
        .await
        .unwrap();
    assert_eq!(
        (
            info.policy.max_execution_seconds,
            info.policy.max_output_bytes,
            info.policy.shell
        ),
        (5, 4096, false)
    );
}

#[tokio::test]
async fn sessions_expire_and_survive_a_restart() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    ctx.ok(
        &s,
        "write_file",
        json!({"path": "a.txt", "content": "kept"}),
    )
    .await;

    // A new gateway over the same store and data directory (a restarted server) knows it.
    let again = forge_gateway::Gateway::new(
        ctx.backend.clone(),
        ctx.store.clone(),
        forge_gateway::GatewayConfig::new(ctx.dir.path()),
    );
    let info = again.session(&s).await.unwrap();
    assert_eq!((info.calls, info.state.as_str()), (1, "open"));
    let read = again
        .call(&s, "read_file", json!({"path": "a.txt"}), None)
        .await
        .unwrap();
    assert_eq!(read.result["content"], json!("kept"));

    let short = ctx.session("session_ttl_seconds = 1").await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let reaped = ctx.gateway.reap().await.unwrap();
    assert_eq!(
        reaped.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![short.clone()]
    );
    let closed = ctx
        .gateway
        .call(&short, "list_directory", json!({}), None)
        .await;
    assert!(
        matches!(closed, Err(GatewayError::SessionClosed { .. })),
        "{closed:?}"
    );
    let info = ctx.gateway.session(&short).await.unwrap();
    assert_eq!(info.state, "closed");

    let unknown = ctx
        .gateway
        .call("ses-000000000000", "list_directory", json!({}), None)
        .await;
    assert!(matches!(unknown, Err(GatewayError::SessionNotFound { .. })));
}

#[tokio::test]
async fn an_idempotency_key_replays_instead_of_running_twice() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    let call = |key: &'static str| {
        ctx.gateway.call(
            &s,
            "run_code",
            json!({"language": "python", "code": "import random; print(random.random())"}),
            Some(key.to_owned()),
        )
    };
    let first = call("k1").await.unwrap();
    let again = call("k1").await.unwrap();
    let other = call("k2").await.unwrap();
    assert_eq!(
        (again.result.clone(), again.ledger_seq, again.replayed),
        (first.result.clone(), first.ledger_seq, true)
    );
    assert_ne!(other.result, first.result);
    assert_eq!(ctx.gateway.ledger(Some(&s), 10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn the_sandbox_follows_the_policy_memory_and_network() {
    use forge_sandbox::Backend;

    let ctx = Ctx::new().await;
    let s = ctx.session("max_memory_mb = 256").await;
    let info = ctx.gateway.session(&s).await.unwrap();
    let sandbox = ctx.backend.get(&info.sandbox_id).await.unwrap();
    assert_eq!(
        (sandbox.spec.limits.memory_bytes, sandbox.spec.network),
        (256 << 20, forge_types::NetworkMode::None)
    );
    // A memory hog is stopped by the sandbox's limit.
    let hog = ctx
        .ok(
            &s,
            "run_code",
            json!({"language": "python", "code": "x = b'a' * (512 << 20)"}),
        )
        .await;
    assert_ne!(hog["exit_code"], json!(0));

    // An open network is either made real by the backend or refused with a clear error.
    let open = ctx
        .gateway
        .create_session(SessionRequest {
            policy: Some(Policy::from_toml("network = { mode = \"open\" }").unwrap()),
            sandbox_id: None,
        })
        .await;
    match open {
        Ok(info) => assert_eq!(info.policy.network, forge_policy::Network::Open),
        Err(GatewayError::Sandbox {
            source: forge_sandbox::SandboxError::Unsupported { feature },
            ..
        }) => assert!(feature.contains("open"), "{feature}"),
        Err(other) => panic!("{other:?}"),
    }

    // Attaching to an existing sandbox: the session does not own it, closing leaves it.
    let attached = ctx
        .gateway
        .create_session(SessionRequest {
            policy: None,
            sandbox_id: Some(info.sandbox_id.clone()),
        })
        .await
        .unwrap();
    assert!(!attached.owns_sandbox);
    ctx.gateway.close(attached.id.as_str()).await.unwrap();
    ctx.backend.get(&info.sandbox_id).await.unwrap();
    ctx.gateway.close(&s).await.unwrap();
    assert!(ctx.backend.get(&info.sandbox_id).await.is_err());
}
