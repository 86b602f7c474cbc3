//! Opening stores: files and parent directories created, errors that name the path, clones
//! sharing one database.

use forge_store::{Store, StoreError};
use pretty_assertions::assert_eq;

use crate::sandbox;

#[tokio::test]
async fn open_creates_the_file_and_its_parent_directories_in_wal_mode() {
    let dir = forge_test_support::data_dir();
    let path = dir.path().join("state/nested/forge.db");
    let store = Store::open(&path).await.unwrap();
    store.insert_sandbox(&sandbox("sb-1", 1, 2)).await.unwrap();

    // While a WAL database is open, its write-ahead log sits beside it.
    let files = (
        path.is_file(),
        dir.path().join("state/nested/forge.db-wal").is_file(),
    );
    assert_eq!(files, (true, true));
    store.close().await;
}

#[tokio::test]
async fn reopening_keeps_the_data_and_does_not_migrate_again() {
    let dir = forge_test_support::data_dir();
    let path = dir.path().join("forge.db");
    let store = Store::open(&path).await.unwrap();
    store.insert_sandbox(&sandbox("sb-1", 1, 2)).await.unwrap();
    store.close().await;

    let store = Store::open(&path).await.unwrap();
    assert_eq!(
        store.list_sandboxes(true).await.unwrap(),
        vec![sandbox("sb-1", 1, 2)]
    );
    store.close().await;
}

#[tokio::test]
async fn an_unusable_path_is_an_open_error_naming_it() {
    let dir = forge_test_support::data_dir();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let path = file.join("forge.db");

    let error = Store::open(&path).await.unwrap_err();
    assert!(
        matches!(&error, StoreError::Open { path: p, .. } if *p == path),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!("cannot open database {}", path.display())
    );
}

#[tokio::test]
async fn clones_share_the_in_memory_database() {
    let store = Store::open_in_memory().await.unwrap();
    let clone = store.clone();
    clone.insert_sandbox(&sandbox("sb-1", 1, 2)).await.unwrap();
    assert_eq!(
        store.get_sandbox("sb-1").await.unwrap(),
        Some(sandbox("sb-1", 1, 2))
    );
}

#[tokio::test]
async fn a_closed_store_fails_queries_with_the_operation_named() {
    let store = Store::open_in_memory().await.unwrap();
    store.close().await;
    let error = store.last_event_id().await.unwrap_err();
    assert!(
        matches!(
            &error,
            StoreError::Query {
                what: "read last event id",
                source: sqlx::Error::PoolClosed
            }
        ),
        "{error:?}"
    );
}
