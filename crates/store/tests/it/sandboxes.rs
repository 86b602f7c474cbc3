//! Sandbox rows: insert and read back, conflicts, listing order, expiry, destruction, counts.

use forge_store::{SandboxCounts, SandboxRecord, Store, StoreError};
use pretty_assertions::assert_eq;

use crate::sandbox;

/// `record` as [`Store::mark_destroyed`] leaves it.
fn destroyed(record: SandboxRecord, at_ms: i64, reason: &str) -> SandboxRecord {
    SandboxRecord {
        state: SandboxRecord::DESTROYED.to_owned(),
        destroyed_at_ms: Some(at_ms),
        destroy_reason: Some(reason.to_owned()),
        ..record
    }
}

#[tokio::test]
async fn insert_then_get_returns_every_field() {
    let store = Store::open_in_memory().await.unwrap();
    let record = sandbox("sb-1", 100, 700);
    let bare = SandboxRecord {
        owner_id: None,
        metadata: [].into(),
        spec: serde_json::Value::Null,
        template: None,
        init_pid: None,
        ..sandbox("sb-2", 100, 700)
    };
    store.insert_sandbox(&record).await.unwrap();
    store.insert_sandbox(&bare).await.unwrap();

    let read = (
        store.get_sandbox("sb-1").await.unwrap(),
        store.get_sandbox("sb-2").await.unwrap(),
        store.get_sandbox("sb-unknown").await.unwrap(),
    );
    assert_eq!(read, (Some(record), Some(bare), None));
}

#[tokio::test]
async fn inserting_a_taken_id_is_a_conflict_and_keeps_the_first_row() {
    let store = Store::open_in_memory().await.unwrap();
    let first = sandbox("sb-1", 100, 700);
    store.insert_sandbox(&first).await.unwrap();

    let second = SandboxRecord {
        image: "debian:12".to_owned(),
        ..sandbox("sb-1", 200, 800)
    };
    let error = store.insert_sandbox(&second).await.unwrap_err();
    assert!(
        matches!(&error, StoreError::Conflict { what: "sandbox", key } if key == "sb-1"),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "sandbox \"sb-1\" already exists");
    assert_eq!(store.get_sandbox("sb-1").await.unwrap(), Some(first));
}

#[tokio::test]
async fn list_is_newest_first_with_ties_by_id_and_hides_destroyed_unless_asked() {
    let store = Store::open_in_memory().await.unwrap();
    let old = sandbox("sb-old", 100, 1_000);
    let middle = sandbox("sb-middle", 200, 1_000);
    let new_b = sandbox("sb-new-b", 300, 1_000);
    let new_a = sandbox("sb-new-a", 300, 1_000);
    for record in [&old, &middle, &new_b, &new_a] {
        store.insert_sandbox(record).await.unwrap();
    }
    assert!(
        store
            .mark_destroyed("sb-middle", 250, "deleted")
            .await
            .unwrap()
    );
    let middle = destroyed(middle, 250, "deleted");

    let lists = (
        store.list_sandboxes(true).await.unwrap(),
        store.list_sandboxes(false).await.unwrap(),
    );
    assert_eq!(
        lists,
        (
            vec![new_a.clone(), new_b.clone(), middle, old.clone()],
            vec![new_a, new_b, old],
        )
    );
}

#[tokio::test]
async fn list_of_an_empty_store_is_empty() {
    let store = Store::open_in_memory().await.unwrap();
    assert_eq!(store.list_sandboxes(true).await.unwrap(), vec![]);
}

#[tokio::test]
async fn expiry_moves_only_for_live_sandboxes() {
    let store = Store::open_in_memory().await.unwrap();
    store
        .insert_sandbox(&sandbox("sb-live", 100, 700))
        .await
        .unwrap();
    store
        .insert_sandbox(&sandbox("sb-gone", 100, 700))
        .await
        .unwrap();
    store
        .mark_destroyed("sb-gone", 300, "deleted")
        .await
        .unwrap();

    let updated = (
        store.set_expiry("sb-live", 9_000).await.unwrap(),
        store.set_expiry("sb-gone", 9_000).await.unwrap(),
        store.set_expiry("sb-unknown", 9_000).await.unwrap(),
    );
    assert_eq!(updated, (true, false, false));
    let rows = (
        store.get_sandbox("sb-live").await.unwrap(),
        store.get_sandbox("sb-gone").await.unwrap(),
    );
    assert_eq!(
        rows,
        (
            Some(sandbox("sb-live", 100, 9_000)),
            Some(destroyed(sandbox("sb-gone", 100, 700), 300, "deleted")),
        )
    );
}

#[tokio::test]
async fn init_pid_is_set_and_cleared_whatever_the_state() {
    let store = Store::open_in_memory().await.unwrap();
    store
        .insert_sandbox(&sandbox("sb-1", 100, 700))
        .await
        .unwrap();
    store
        .insert_sandbox(&sandbox("sb-2", 100, 700))
        .await
        .unwrap();
    store.mark_destroyed("sb-2", 300, "ttl").await.unwrap();

    let updated = (
        store.set_init_pid("sb-1", Some(31_337)).await.unwrap(),
        store.set_init_pid("sb-2", None).await.unwrap(),
        store.set_init_pid("sb-unknown", Some(1)).await.unwrap(),
    );
    assert_eq!(updated, (true, true, false));
    let rows = (
        store.get_sandbox("sb-1").await.unwrap(),
        store.get_sandbox("sb-2").await.unwrap(),
    );
    assert_eq!(
        rows,
        (
            Some(SandboxRecord {
                init_pid: Some(31_337),
                ..sandbox("sb-1", 100, 700)
            }),
            Some(SandboxRecord {
                init_pid: None,
                ..destroyed(sandbox("sb-2", 100, 700), 300, "ttl")
            }),
        )
    );
}

#[tokio::test]
async fn destroying_twice_keeps_the_first_time_and_reason() {
    let store = Store::open_in_memory().await.unwrap();
    store
        .insert_sandbox(&sandbox("sb-1", 100, 700))
        .await
        .unwrap();

    let marked = (
        store
            .mark_destroyed("sb-1", 500, "ttl expired")
            .await
            .unwrap(),
        store.mark_destroyed("sb-1", 900, "deleted").await.unwrap(),
        store
            .mark_destroyed("sb-unknown", 900, "deleted")
            .await
            .unwrap(),
    );
    assert_eq!(marked, (true, false, false));
    assert_eq!(
        store.get_sandbox("sb-1").await.unwrap(),
        Some(destroyed(sandbox("sb-1", 100, 700), 500, "ttl expired"))
    );
}

#[tokio::test]
async fn expired_lists_live_sandboxes_at_or_past_expiry_oldest_expiry_first() {
    let store = Store::open_in_memory().await.unwrap();
    for (id, expires_at_ms) in [
        ("sb-a", 50),
        ("sb-c", 10),
        ("sb-gone", 5),
        ("sb-later", 51),
        ("sb-b", 10),
    ] {
        store
            .insert_sandbox(&sandbox(id, 1, expires_at_ms))
            .await
            .unwrap();
    }
    store.mark_destroyed("sb-gone", 6, "deleted").await.unwrap();

    let expired = (
        store.expired_sandboxes(9).await.unwrap(),
        store.expired_sandboxes(10).await.unwrap(),
        store.expired_sandboxes(50).await.unwrap(),
        store.expired_sandboxes(i64::MAX).await.unwrap(),
    );
    assert_eq!(
        expired,
        (
            vec![],
            vec!["sb-b".to_owned(), "sb-c".to_owned()],
            vec!["sb-b".to_owned(), "sb-c".to_owned(), "sb-a".to_owned()],
            vec![
                "sb-b".to_owned(),
                "sb-c".to_owned(),
                "sb-a".to_owned(),
                "sb-later".to_owned()
            ],
        )
    );
}

#[tokio::test]
async fn counts_split_live_from_all() {
    let store = Store::open_in_memory().await.unwrap();
    let empty = store.sandbox_counts().await.unwrap();
    for id in ["sb-1", "sb-2", "sb-3"] {
        store.insert_sandbox(&sandbox(id, 1, 2)).await.unwrap();
    }
    store.mark_destroyed("sb-2", 3, "deleted").await.unwrap();

    assert_eq!(
        (empty, store.sandbox_counts().await.unwrap()),
        (
            SandboxCounts {
                active: 0,
                total: 0
            },
            SandboxCounts {
                active: 2,
                total: 3
            },
        )
    );
}
