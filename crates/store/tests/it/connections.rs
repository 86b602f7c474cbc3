//! The connection log: every field round-tripped, per-sandbox tails oldest first.

use forge_store::{ConnectionRecord, Store};
use pretty_assertions::assert_eq;

fn connection(sandbox: &str, host: &str, refused: Option<&str>) -> ConnectionRecord {
    ConnectionRecord {
        id: 0,
        sandbox_id: sandbox.to_owned(),
        started_at_ms: 1_700_000_000_000,
        kind: "connect".to_owned(),
        host: host.to_owned(),
        port: 443,
        address: Some("203.0.113.7".to_owned()),
        verdict: if refused.is_some() {
            "refused"
        } else {
            "allowed"
        }
        .to_owned(),
        reason: refused.map(str::to_owned),
        bytes_up: 517,
        bytes_down: 4096,
        duration_ms: 12,
    }
}

#[tokio::test]
async fn connections_round_trip_per_sandbox() {
    let store = Store::open_in_memory().await.unwrap();
    let allowed = connection("sb-1", "pypi.org", None);
    let refused = connection("sb-1", "evil.test", Some("not listed"));
    let mut want = Vec::new();
    for record in [&allowed, &refused] {
        let id = store.record_connection(record).await.unwrap();
        store
            .record_connection(&connection("sb-2", "other.test", None))
            .await
            .unwrap();
        want.push(ConnectionRecord {
            id,
            ..record.clone()
        });
    }
    assert_eq!(store.connections("sb-1", 10).await.unwrap(), want);
    assert_eq!(
        store.connections("sb-1", 1).await.unwrap(),
        want[1..].to_vec()
    );
}
