//! Template rows: insert, conflicts, update, listing order, delete.

use forge_store::{Store, StoreError, TemplateRecord};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::template;

#[tokio::test]
async fn insert_then_get_and_list_sorted_by_name() {
    let store = Store::open_in_memory().await.unwrap();
    let bare = TemplateRecord {
        description: None,
        setup: vec![],
        allowed_hosts: vec![],
        env: [].into(),
        secrets: json!({}),
        ..template("node")
    };
    for t in [template("python"), template("go"), bare.clone()] {
        store.insert_template(&t).await.unwrap();
    }

    let read = (
        store.get_template("node").await.unwrap(),
        store.get_template("rust").await.unwrap(),
        store.list_templates().await.unwrap(),
    );
    assert_eq!(
        read,
        (
            Some(bare.clone()),
            None,
            vec![template("go"), bare, template("python")],
        )
    );
}

#[tokio::test]
async fn inserting_a_taken_name_is_a_conflict_and_keeps_the_first_row() {
    let store = Store::open_in_memory().await.unwrap();
    store.insert_template(&template("python")).await.unwrap();

    let again = TemplateRecord {
        image: "python:3.13".to_owned(),
        ..template("python")
    };
    let error = store.insert_template(&again).await.unwrap_err();
    assert!(
        matches!(&error, StoreError::Conflict { what: "template", key } if key == "python"),
        "{error:?}"
    );
    assert_eq!(
        store.get_template("python").await.unwrap(),
        Some(template("python"))
    );
}

#[tokio::test]
async fn update_replaces_everything_but_the_creation_time() {
    let store = Store::open_in_memory().await.unwrap();
    store.insert_template(&template("python")).await.unwrap();

    let changed = TemplateRecord {
        version: 2,
        image: "python:3.13".to_owned(),
        description: None,
        setup: vec!["uv sync".to_owned()],
        allowed_hosts: vec![],
        memory_mb: 2048,
        cpu_cores: 4,
        ttl_seconds: 60,
        env: [("A".to_owned(), "b".to_owned())].into(),
        secrets: json!(null),
        pool_size: 0,
        created_at_ms: 5_000,
        updated_at_ms: 5_000,
        ..template("python")
    };
    let updated = (
        store.update_template(&changed).await.unwrap(),
        store.update_template(&template("missing")).await.unwrap(),
    );
    assert_eq!(updated, (true, false));
    let read = (
        store.get_template("python").await.unwrap(),
        store.get_template("missing").await.unwrap(),
    );
    assert_eq!(
        read,
        (
            Some(TemplateRecord {
                created_at_ms: 1_000,
                ..changed
            }),
            None,
        )
    );
}

#[tokio::test]
async fn delete_removes_the_row_once() {
    let store = Store::open_in_memory().await.unwrap();
    store.insert_template(&template("python")).await.unwrap();
    store.insert_template(&template("go")).await.unwrap();

    let deleted = (
        store.delete_template("python").await.unwrap(),
        store.delete_template("python").await.unwrap(),
        store.delete_template("missing").await.unwrap(),
    );
    assert_eq!(deleted, (true, false, false));
    assert_eq!(
        (
            store.get_template("python").await.unwrap(),
            store.list_templates().await.unwrap()
        ),
        (None, vec![template("go")])
    );
    // The name is free again.
    store.insert_template(&template("python")).await.unwrap();
}
