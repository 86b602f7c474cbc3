//! A `forge serve` process for a test: its own data directory, a free port, a client.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The API key test servers use (when they use one).
pub(crate) const KEY: &str = "forge-test-key-0123456789";

#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) url: String,
    pub(crate) http: reqwest::Client,
}

impl Server {
    /// Starts a server on `data` (which may hold an earlier server's state).
    pub(crate) async fn start(data: &Path, key: Option<&str>, extra: &[&str]) -> Self {
        #[expect(
            clippy::disallowed_methods,
            reason = "runs the forge binary under test"
        )]
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_forge"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .args(extra)
            .env_remove("FORGE_API_KEY")
            .env_remove("FORGE_CONFIG")
            .env("FORGE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(key) = key {
            command.args(["--api-key", key]);
        }
        let mut child = command.spawn().expect("start forge serve");
        let stderr = child.stderr.take().unwrap();
        // The server announces its address on stderr once it listens.
        let url = tokio::task::spawn_blocking(move || {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(stderr).lines();
            let mut seen = Vec::new();
            for line in lines.by_ref() {
                let line = line.unwrap_or_default();
                if let Some(rest) = line.split("forge listening on ").nth(1) {
                    let url = rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    // Keep draining stderr so the server never blocks on a full pipe.
                    std::thread::spawn(move || for _ in lines {});
                    return Ok(url);
                }
                seen.push(line);
            }
            Err(seen.join("\n"))
        })
        .await
        .unwrap()
        .unwrap_or_else(|output| panic!("forge serve did not start:\n{output}"));
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(key) = key {
            headers.insert("x-api-key", key.parse().unwrap());
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
        Self { child, url, http }
    }

    pub(crate) fn api(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.url)
    }

    pub(crate) async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self
            .http
            .post(self.api(path))
            .json(body)
            .send()
            .await
            .expect("POST");
        (
            response.status().as_u16(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        let response = self.http.get(self.api(path)).send().await.expect("GET");
        (
            response.status().as_u16(),
            response.json().await.unwrap_or(Value::Null),
        )
    }

    pub(crate) async fn spawn(&self) -> String {
        let (status, body) = self
            .post(
                "/sandboxes",
                &serde_json::json!({"image": "host", "ttl": "10m"}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    pub(crate) async fn exec(&self, id: &str, command: &str) -> Value {
        let (status, body) = self
            .post(
                &format!("/sandboxes/{id}/exec"),
                &serde_json::json!({"command": command}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Destroys every sandbox the server knows, then stops it with SIGTERM.
    pub(crate) async fn stop(mut self) {
        let (_, sandboxes) = self.get("/sandboxes").await;
        for sandbox in sandboxes.as_array().into_iter().flatten() {
            let id = sandbox["id"].as_str().unwrap_or_default();
            let _ = self
                .http
                .delete(self.api(&format!("/sandboxes/{id}")))
                .send()
                .await;
        }
        self.terminate().await;
    }

    /// Stops the server with SIGTERM (its sandboxes keep running) and waits for it.
    pub(crate) async fn terminate(&mut self) {
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.child.id()).unwrap()).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        for _ in 0..200 {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the server with SIGKILL, as a crash would.
    pub(crate) fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The pid of the server's sandbox helper (its only child process).
    pub(crate) fn helper_pid(&self) -> Option<u32> {
        forge_test_support::children(self.child.id())
            .into_iter()
            .next()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
