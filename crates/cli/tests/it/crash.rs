//! Crash: `kill -9` of the server in the middle of activity, then a restart on the same
//! data directory. Every sandbox is either taken back with its state or recorded as
//! destroyed; nothing runs unaccounted for.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::server::Server;

#[tokio::test]
async fn a_killed_server_restarts_with_the_truth() {
    let data = forge_test_support::data_dir();
    let mut server = Server::start(data.path(), None, &[]).await;
    let kept = server.spawn().await;
    server
        .post(
            &format!("/sandboxes/{kept}/files"),
            &json!({"path": "/workspace/state", "content": "before the crash"}),
        )
        .await;
    let doomed = server.spawn().await;
    let doomed_pid = std::fs::read_to_string(
        data.path()
            .join("sandboxes")
            .join(&doomed)
            .join("sandbox.json"),
    )
    .unwrap();
    let doomed_pid: serde_json::Value = serde_json::from_str(&doomed_pid).unwrap();
    let doomed_pid = i32::try_from(doomed_pid["info"]["init_pid"].as_i64().unwrap()).unwrap();
    let busy = server.spawn().await;

    // Activity in flight: a background process, and execs from several clients.
    let (status, _) = server
        .post(
            &format!("/sandboxes/{busy}/processes"),
            &json!({"command": "sleep 300", "tag": "survivor"}),
        )
        .await;
    assert_eq!(status, 201);
    let http = server.http.clone();
    let url = server.api(&format!("/sandboxes/{busy}/exec"));
    let traffic: Vec<_> = (0..8)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move {
                for _ in 0..50 {
                    let _ = http
                        .post(&url)
                        .json(&json!({"command": "echo busy"}))
                        .send()
                        .await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.crash();
    for task in traffic {
        let _ = task.await;
    }
    // While the server is down one sandbox dies too.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(doomed_pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();

    let server = Arc::new(Server::start(data.path(), None, &[]).await);
    let (_, listed) = server.get("/sandboxes").await;
    let mut live: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    live.sort();
    let mut expected = vec![kept.clone(), busy.clone()];
    expected.sort();
    assert_eq!(live, expected);
    assert_eq!(server.get(&format!("/sandboxes/{doomed}")).await.0, 404);

    // What survived still works, with its files and its background process.
    let read = server
        .http
        .get(server.api(&format!("/sandboxes/{kept}/files")))
        .query(&[("path", "/workspace/state")])
        .send()
        .await
        .unwrap();
    assert_eq!(read.text().await.unwrap(), "before the crash");
    assert_eq!(server.exec(&busy, "echo alive").await["stdout"], "alive\n");
    let (_, processes) = server.get(&format!("/sandboxes/{busy}/processes")).await;
    assert_eq!(
        (processes[0]["tag"].as_str(), processes[0]["state"].as_str()),
        (Some("survivor"), Some("running"))
    );

    // The lost sandbox is on record, with an event saying so.
    let events = server
        .http
        .get(server.api("/events"))
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    let mut body = events.bytes_stream();
    let mut text = String::new();
    while !text.contains("sandbox.lost") {
        let chunk =
            tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut body))
                .await
                .expect("events")
                .unwrap()
                .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains(&doomed), "{text}");

    // On disk too: the lost sandbox's directory is gone, the live ones remain.
    let mut dirs: Vec<String> = forge_test_support::entries(&data.path().join("sandboxes"))
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
        .collect();
    dirs.sort();
    assert_eq!(dirs, expected);
    Arc::into_inner(server).unwrap().stop().await;
    // Once destroyed, the adopted sandboxes leave nothing either.
    for _ in 0..100 {
        if forge_test_support::entries(&data.path().join("sandboxes")).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        forge_test_support::entries(&data.path().join("sandboxes")),
        Vec::<std::path::PathBuf>::new()
    );
}
