//! The exec log: ids, per-sandbox tails, every field round-tripped.

use forge_store::{ExecRecord, NewExec, Store};
use pretty_assertions::assert_eq;

use crate::exec;

#[tokio::test]
async fn record_returns_growing_ids_and_keeps_every_field() {
    let store = Store::open_in_memory().await.unwrap();
    let killed = NewExec {
        exit_code: -1,
        signal: Some(9),
        duration_us: 30_000_000,
        timed_out: true,
        oom_killed: true,
        streamed: true,
        ..exec("sb-1", "sleep 100", 20)
    };
    let first = store
        .record_exec(&exec("sb-1", "echo hi", 10))
        .await
        .unwrap();
    let second = store.record_exec(&killed).await.unwrap();

    assert_eq!((first, second), (1, 2));
    assert_eq!(
        store.exec_log("sb-1", 10).await.unwrap(),
        vec![
            ExecRecord::new(1, exec("sb-1", "echo hi", 10)),
            ExecRecord::new(2, killed)
        ]
    );
}

#[tokio::test]
async fn log_is_the_sandboxs_last_rows_oldest_first() {
    let store = Store::open_in_memory().await.unwrap();
    let mut mine = Vec::new();
    for n in 0..5 {
        let command = format!("step {n}");
        let e = exec("sb-mine", &command, n);
        let id = store.record_exec(&e).await.unwrap();
        mine.push(ExecRecord::new(id, e));
        store
            .record_exec(&exec("sb-other", &command, n))
            .await
            .unwrap();
    }

    let logs = (
        store.exec_log("sb-mine", 3).await.unwrap(),
        store.exec_log("sb-mine", 100).await.unwrap(),
        store.exec_log("sb-mine", 0).await.unwrap(),
        store.exec_log("sb-mine", -1).await.unwrap(),
        store.exec_log("sb-unknown", 10).await.unwrap(),
    );
    assert_eq!(
        logs,
        (mine[2..].to_vec(), mine.clone(), vec![], vec![], vec![])
    );
}
