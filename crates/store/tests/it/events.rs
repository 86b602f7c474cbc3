//! The event stream: ids, cursors, payloads, concurrent appends and ids across reopen.

use forge_store::{EventRecord, NewEvent, Store};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::event;

#[tokio::test]
async fn an_empty_stream_has_last_id_zero_and_nothing_after_it() {
    let store = Store::open_in_memory().await.unwrap();
    assert_eq!(
        (
            store.last_event_id().await.unwrap(),
            store.events_after(0, 10).await.unwrap()
        ),
        (0, vec![])
    );
}

#[tokio::test]
async fn appended_events_come_back_after_a_cursor_in_id_order() {
    let store = Store::open_in_memory().await.unwrap();
    let without_data = NewEvent {
        data: None,
        ..event("sandbox.created", Some("sb-1"), 10)
    };
    let null_data = NewEvent {
        data: Some(json!(null)),
        ..event("pool.refilled", None, 20)
    };
    let with_data = event("sandbox.destroyed", Some("sb-1"), 30);

    let mut appended = Vec::new();
    for e in [&without_data, &null_data, &with_data] {
        appended.push(store.append_event(e).await.unwrap());
    }
    assert_eq!(
        appended,
        vec![
            EventRecord::new(1, without_data),
            EventRecord::new(2, null_data),
            EventRecord::new(3, with_data),
        ]
    );

    let read = (
        store.events_after(0, 10).await.unwrap(),
        store.events_after(1, 10).await.unwrap(),
        store.events_after(0, 2).await.unwrap(),
        store.events_after(3, 10).await.unwrap(),
        store.events_after(0, 0).await.unwrap(),
        store.last_event_id().await.unwrap(),
    );
    assert_eq!(
        read,
        (
            appended.clone(),
            appended[1..].to_vec(),
            appended[..2].to_vec(),
            vec![],
            vec![],
            3
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_get_unique_ids_that_grow_per_task() {
    const TASKS: i64 = 16;
    const PER_TASK: i64 = 25;
    let dir = forge_test_support::data_dir();
    let store = Store::open(&dir.path().join("forge.db")).await.unwrap();

    let mut handles = Vec::new();
    for task in 0..TASKS {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let mut records = Vec::new();
            for n in 0..PER_TASK {
                let kind = format!("task-{task}.event-{n}");
                records.push(store.append_event(&event(&kind, None, n)).await.unwrap());
            }
            records
        }));
    }
    let mut appended = Vec::new();
    for handle in handles {
        let records = handle.await.unwrap();
        let ids: Vec<i64> = records.iter().map(|r| r.id).collect();
        assert!(ids.is_sorted_by(|a, b| a < b), "ids of one task: {ids:?}");
        appended.extend(records);
    }
    appended.sort_by_key(|r| r.id);

    let ids: Vec<i64> = appended.iter().map(|r| r.id).collect();
    assert_eq!(ids, (1..=TASKS * PER_TASK).collect::<Vec<_>>());
    assert_eq!(store.events_after(0, 1_000).await.unwrap(), appended);
    store.close().await;
}

#[tokio::test]
async fn ids_keep_growing_across_a_reopen() {
    let dir = forge_test_support::data_dir();
    let path = dir.path().join("forge.db");
    let store = Store::open(&path).await.unwrap();
    let first = store.append_event(&event("a", None, 1)).await.unwrap();
    let second = store.append_event(&event("b", None, 2)).await.unwrap();
    store.close().await;

    let store = Store::open(&path).await.unwrap();
    let last_before = store.last_event_id().await.unwrap();
    let third = store.append_event(&event("c", None, 3)).await.unwrap();
    assert_eq!(
        (
            last_before,
            store.events_after(0, 10).await.unwrap(),
            store.last_event_id().await.unwrap()
        ),
        (
            2,
            vec![first, second, EventRecord::new(3, event("c", None, 3))],
            3
        )
    );
    assert_eq!(third.id, 3);
    store.close().await;
}

#[tokio::test]
async fn a_journal_batch_writes_events_and_execs_in_order_in_one_transaction() {
    use forge_store::{ExecRecord, JournalEntry};

    let store = Store::open_in_memory().await.unwrap();
    let before = store.append_event(&event("first", None, 1)).await.unwrap();
    let created = event("sandbox.created", Some("sb-1"), 2);
    let ran = crate::exec("sb-1", "echo hi", 3);
    let completed = event("exec.completed", Some("sb-1"), 4);
    let batch = [
        JournalEntry::Event(created.clone()),
        JournalEntry::Exec(ran.clone()),
        JournalEntry::Event(completed.clone()),
    ];

    let written = store.append_journal(&batch).await.unwrap();
    let expected = vec![EventRecord::new(2, created), EventRecord::new(3, completed)];
    assert_eq!(written, expected);
    assert_eq!(
        (
            store.events_after(0, 10).await.unwrap(),
            store.exec_log("sb-1", 10).await.unwrap(),
            store.append_journal(&[]).await.unwrap(),
        ),
        (
            [vec![before], expected].concat(),
            vec![ExecRecord::new(1, ran)],
            vec![],
        )
    );
}
