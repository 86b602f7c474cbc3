//! Load: 100 sandboxes at once and 5,000 exec requests from 50 concurrent clients, with no
//! error, then nothing left once they are destroyed.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::server::Server;

#[tokio::test]
async fn a_hundred_sandboxes_and_five_thousand_execs_without_an_error() {
    let data = forge_test_support::data_dir();
    let server = Arc::new(Server::start(data.path(), None, &["--max-sandboxes", "100"]).await);

    let spawns: Vec<_> = (0..100)
        .map(|_| {
            let server = server.clone();
            tokio::spawn(async move { server.spawn().await })
        })
        .collect();
    let mut ids = Vec::new();
    for spawn in spawns {
        ids.push(spawn.await.unwrap());
    }
    let ids = Arc::new(ids);
    assert_eq!(
        server.get("/sandboxes").await.1.as_array().map(Vec::len),
        Some(100)
    );

    // 50 clients, each with its own connection pool, 100 requests each, round robin over
    // the sandboxes; every answer must be a successful run of the command.
    let clients: Vec<_> = (0..50)
        .map(|client| {
            let server = server.clone();
            let ids = ids.clone();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut failures = Vec::new();
                for n in 0..100 {
                    let id = &ids[(client * 100 + n) % ids.len()];
                    let url = server.api(&format!("/sandboxes/{id}/exec"));
                    let answer = http
                        .post(url)
                        .json(&json!({"command": "echo", "args": [format!("{client}-{n}")]}))
                        .send()
                        .await;
                    match answer {
                        Ok(response) if response.status() == 200 => {
                            let body: serde_json::Value = response.json().await.unwrap_or_default();
                            if body["exit_code"] != 0 || body["stdout"] != format!("{client}-{n}\n")
                            {
                                failures.push(format!("{id}: {body}"));
                            }
                        }
                        Ok(response) => failures.push(format!(
                            "{id}: HTTP {} {}",
                            response.status(),
                            response.text().await.unwrap_or_default()
                        )),
                        Err(err) => failures.push(format!("{id}: {err}")),
                    }
                }
                failures
            })
        })
        .collect();
    let mut failures = Vec::new();
    for client in clients {
        failures.extend(client.await.unwrap());
    }
    assert_eq!(failures, Vec::<String>::new());

    let helper = server.helper_pid().expect("the server's helper");
    for id in ids.iter() {
        let response = server
            .http
            .delete(server.api(&format!("/sandboxes/{id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    // Nothing is left: no sandbox process (each lives under an init the helper forked), no
    // directory, no record.
    let mut leftovers = (Vec::new(), Vec::new());
    for _ in 0..200 {
        leftovers = (
            forge_test_support::children(helper),
            forge_test_support::entries(&data.path().join("sandboxes")),
        );
        if leftovers == (vec![], vec![])
            && forge_test_support::entries(&data.path().join("trash")).is_empty()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(leftovers, (vec![], vec![]));
    assert_eq!(server.get("/sandboxes").await.1, json!([]));
    let (_, metrics) = server.get("/metrics").await;
    assert_eq!(
        (
            metrics["active_sandboxes"].as_u64(),
            metrics["total_sandboxes"].as_u64()
        ),
        (Some(0), Some(100))
    );
    Arc::into_inner(server).unwrap().stop().await;
}
