//! Committed writes survive the writer going away without closing the store: dropped without
//! `close`, and killed with SIGKILL mid-run (the data is then only in the write-ahead log).

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};

use forge_store::{
    EventRecord, ExecRecord, NewEvent, NewExec, SandboxRecord, Store, TemplateRecord,
};
use pretty_assertions::assert_eq;

use crate::{event, exec, sandbox, template};

/// Where the child process finds its database; its presence makes the child test act.
const CHILD_DB_ENV: &str = "FORGE_STORE_TEST_CHILD_DB";
/// The line the child prints once everything is committed.
const COMMITTED: &str = "forge-store-child: committed";
/// SIGKILL's number on every Linux architecture.
const SIGKILL: i32 = 9;

/// What a writer commits, so the reader knows what to expect.
struct Writes {
    sandbox: SandboxRecord,
    template: TemplateRecord,
    execs: Vec<NewExec>,
    events: Vec<NewEvent>,
}

fn writes() -> Writes {
    Writes {
        sandbox: sandbox("sb-durable", 100, 700),
        template: template("python"),
        execs: (0..3)
            .map(|n| exec("sb-durable", &format!("step {n}"), n))
            .collect(),
        events: (0..4)
            .map(|n| event("sandbox.exec", Some("sb-durable"), n))
            .collect(),
    }
}

async fn write_all(store: &Store, writes: &Writes) {
    store.insert_sandbox(&writes.sandbox).await.unwrap();
    store.insert_template(&writes.template).await.unwrap();
    for e in &writes.execs {
        store.record_exec(e).await.unwrap();
    }
    for e in &writes.events {
        store.append_event(e).await.unwrap();
    }
}

/// Reads back everything [`write_all`] wrote and checks it whole.
async fn assert_all_read_back(store: &Store, writes: Writes) {
    let read = (
        store.get_sandbox(&writes.sandbox.id).await.unwrap(),
        store.get_template(&writes.template.name).await.unwrap(),
        store.exec_log(&writes.sandbox.id, 100).await.unwrap(),
        store.events_after(0, 100).await.unwrap(),
    );
    let expected = (
        Some(writes.sandbox),
        Some(writes.template),
        (1..)
            .zip(writes.execs)
            .map(|(id, e)| ExecRecord::new(id, e))
            .collect(),
        (1..)
            .zip(writes.events)
            .map(|(id, e)| EventRecord::new(id, e))
            .collect(),
    );
    assert_eq!(read, expected);
}

#[tokio::test]
async fn dropped_without_close_keeps_committed_writes() {
    let dir = forge_test_support::data_dir();
    let path = dir.path().join("forge.db");
    let store = Store::open(&path).await.unwrap();
    write_all(&store, &writes()).await;
    drop(store);

    let store = Store::open(&path).await.unwrap();
    assert_all_read_back(&store, writes()).await;
    store.close().await;
}

/// The writer half of [`killed_with_sigkill_keeps_committed_writes`]: run in a child process
/// of this test binary, it commits, says so, and waits to be killed.
#[tokio::test]
#[ignore = "the child process of killed_with_sigkill_keeps_committed_writes"]
async fn child_commits_then_waits_to_be_killed() {
    let Some(path) = std::env::var_os(CHILD_DB_ENV) else {
        return;
    };
    let store = Store::open(Path::new(&path)).await.unwrap();
    write_all(&store, &writes()).await;
    println!("{COMMITTED}");
    tokio::time::sleep(std::time::Duration::from_mins(2)).await;
}

/// Kills the child when the test ends, however it ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn killed_with_sigkill_keeps_committed_writes() {
    let dir = forge_test_support::data_dir();
    let path = dir.path().join("forge.db");
    #[expect(
        clippy::disallowed_methods,
        reason = "the child is this test binary itself, not user code"
    )]
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "durability::child_commits_then_waits_to_be_killed",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_DB_ENV, &path)
        .stdout(Stdio::piped());
    let mut child = KillOnDrop(command.spawn().unwrap());

    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut lines = stdout.lines();
    loop {
        let line = lines
            .next()
            .expect("the child exited before committing")
            .unwrap();
        if line == COMMITTED {
            break;
        }
    }
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.signal(), Some(SIGKILL));

    // Nothing was checkpointed: the committed writes are in the write-ahead log only.
    let wal = std::fs::metadata(dir.path().join("forge.db-wal")).unwrap();
    assert!(wal.len() > 0, "the WAL is empty");

    let store = Store::open(&path).await.unwrap();
    assert_all_read_back(&store, writes()).await;
    store.close().await;
}
