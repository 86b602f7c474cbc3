//! The WebSocket routes: exec with its exit code in the last frame, and an interactive
//! terminal with input, resize and hang-up.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::server::Server;

fn ws_url(server: &Server, path: &str) -> String {
    format!(
        "{}/api/v1{path}",
        server.url.replacen("http://", "ws://", 1)
    )
}

#[tokio::test]
async fn exec_over_a_websocket_ends_with_the_exit_code() {
    let data = forge_test_support::data_dir();
    let server = Server::start(data.path(), None, &[]).await;
    let id = server.spawn().await;
    let (mut socket, _) =
        tokio_tungstenite::connect_async(ws_url(&server, &format!("/sandboxes/{id}/exec/ws")))
            .await
            .unwrap();
    let request = json!({"command": "echo one; sleep 0.2; echo two >&2; exit 4"});
    socket
        .send(Message::Text(request.to_string().into()))
        .await
        .unwrap();
    let mut frames = Vec::new();
    while let Some(message) = socket.next().await {
        match message.unwrap() {
            Message::Text(text) => {
                let mut value: Value = serde_json::from_str(&text).unwrap();
                if value["type"] == "done" {
                    value["duration"] = json!("…");
                }
                frames.push(value);
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
    assert_eq!(
        frames,
        vec![
            json!({"stream": "stdout", "data": "one\n"}),
            json!({"stream": "stderr", "data": "two\n"}),
            json!({"type": "done", "exit_code": 4, "timed_out": false, "oom_killed": false, "duration": "…"}),
        ]
    );
    // A first message that is not a request closes with 1007.
    let (mut socket, _) =
        tokio_tungstenite::connect_async(ws_url(&server, &format!("/sandboxes/{id}/exec/ws")))
            .await
            .unwrap();
    socket.send(Message::Text("not json".into())).await.unwrap();
    let close = loop {
        if let Message::Close(frame) = socket.next().await.unwrap().unwrap() {
            break frame.map(|f| u16::from(f.code));
        }
    };
    assert_eq!(close, Some(1007));
    server.stop().await;
}

#[tokio::test]
async fn a_terminal_over_a_websocket_takes_input_and_resizes() {
    let data = forge_test_support::data_dir();
    let server = Server::start(data.path(), None, &[]).await;
    let id = server.spawn().await;
    let url = ws_url(
        &server,
        &format!("/sandboxes/{id}/pty?command=sh&cols=80&rows=24"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut screen = String::new();
    let read_until = async |socket: &mut tokio_tungstenite::WebSocketStream<_>,
                            needle: &str,
                            screen: &mut String| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !screen.contains(needle) {
            let message = tokio::time::timeout_at(deadline, socket.next())
                .await
                .expect(needle)
                .unwrap()
                .unwrap();
            match message {
                Message::Binary(data) => screen.push_str(&String::from_utf8_lossy(&data)),
                Message::Text(text) => screen.push_str(&text),
                _ => {}
            }
        }
    };
    socket
        .send(Message::Binary(b"echo $((40+2))\n".to_vec().into()))
        .await
        .unwrap();
    read_until(&mut socket, "42", &mut screen).await;
    socket
        .send(Message::Text(
            json!({"type": "resize", "cols": 120, "rows": 50})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    socket
        .send(Message::Text(
            json!({"type": "input", "data": "stty size\n"})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    read_until(&mut socket, "50 120", &mut screen).await;
    socket
        .send(Message::Binary(b"exit 3\n".to_vec().into()))
        .await
        .unwrap();
    read_until(&mut socket, "\"exit_code\":3", &mut screen).await;
    // The terminal is a background process the API can list.
    let (_, processes) = server.get(&format!("/sandboxes/{id}/processes")).await;
    assert_eq!(
        (
            processes[0]["tag"].as_str(),
            processes[0]["pty"].as_bool(),
            processes[0]["exit_code"].as_i64()
        ),
        (Some("terminal"), Some(true), Some(3))
    );
    server.stop().await;
}
