//! The ledger through the gateway: every call recorded in SQLite and the JSONL chain, secrets
//! redacted, tampering found.

use forge_gateway::{Outcome, VerifyError, verify};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::Ctx;

#[tokio::test]
async fn every_call_is_chained_and_secrets_never_reach_the_ledger() {
    let ctx = Ctx::new().await;
    let s = ctx.session("").await;
    ctx.ok(
        &s,
        "write_env_file",
        json!({"env": {"API_TOKEN": "tok-very-secret-42"}}),
    )
    .await;
    // The value is a secret now: redacted from outputs too.
    let leaked = ctx
        .ok(
            &s,
            "run_code",
            json!({"language": "python", "code": "print(open('/workspace/.env').read())"}),
        )
        .await;
    assert_eq!(leaked["stdout"], json!("API_TOKEN=\"[REDACTED]\"\n\n"));
    ctx.call(&s, "read_file", json!({"path": ".env"})).await;
    ctx.call(&s, "read_file", json!({})).await;

    let text = std::fs::read_to_string(ctx.ledger_path()).unwrap();
    assert!(!text.contains("tok-very-secret-42"), "{text}");
    let report = verify(&ctx.ledger_path(), None).unwrap();
    assert_eq!(report.lines, 4);

    let entries = ctx.gateway.ledger(Some(&s), 10).await.unwrap();
    let summary: Vec<(u64, &str, Outcome, Option<&str>)> = entries
        .iter()
        .map(|e| (e.seq, e.tool.as_str(), e.outcome, e.rule.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [
            (1, "write_env_file", Outcome::Ok, Some("default")),
            (2, "run_code", Outcome::Ok, Some("default")),
            (3, "read_file", Outcome::Denied, Some("secrets")),
            (4, "read_file", Outcome::Invalid, None),
        ]
    );
    assert_eq!(
        entries[0].arguments,
        json!({"env": {"API_TOKEN": "[REDACTED]"}})
    );
    assert_eq!(entries[3].hash, report.last_hash);

    // Edit one line: verify names it.
    let edited = text.replacen("run_code", "run_kode", 1);
    std::fs::write(ctx.ledger_path(), edited).unwrap();
    assert!(matches!(
        verify(&ctx.ledger_path(), None),
        Err(VerifyError::BadLine { line: 2, .. })
    ));
}
