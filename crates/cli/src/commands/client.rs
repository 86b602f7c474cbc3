//! The commands that talk to a running `forge serve`: spawn, list, exec, files, kill,
//! prune. Text for people by default, `--json` for scripts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::cli::{ClientArgs, ExecArgs, ForkArgs, KillArgs, SnapshotArgs, SpawnArgs};
use crate::output;

/// A client for one server.
pub(crate) struct Client {
    pub(crate) http: reqwest::Client,
    base: String,
    pub(crate) json: bool,
}

impl Client {
    pub(crate) fn new(args: &ClientArgs) -> anyhow::Result<Self> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(key) = args.api_key.as_deref().filter(|k| !k.is_empty()) {
            headers.insert(
                "x-api-key",
                key.parse()
                    .context("the API key is not a valid header value")?,
            );
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .context("cannot build an HTTP client")?;
        Ok(Self {
            http,
            base: format!("{}/api/v1", args.url.trim_end_matches('/')),
            json: args.json,
        })
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends a request and turns an error answer into an error that says what the server said.
    pub(crate) async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<reqwest::Response> {
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach the Forge server at {}", self.base))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let message = body["message"].as_str().unwrap_or("no details");
        let code = body["code"].as_str().unwrap_or("");
        if status == reqwest::StatusCode::UNAUTHORIZED {
            bail!(
                "the server refused the request ({code}): {message}; pass --api-key or set FORGE_API_KEY"
            );
        }
        bail!("the server answered {status} {code}: {message}")
    }

    pub(crate) async fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        Ok(self
            .send(self.http.get(self.url(path)))
            .await?
            .json()
            .await?)
    }
}

fn sandbox_line(sandbox: &Value) -> String {
    format!(
        "{}  {}  image={}  memory={}MiB  expires={}",
        sandbox["id"].as_str().unwrap_or("?"),
        sandbox["state"].as_str().unwrap_or("?"),
        sandbox["image"].as_str().unwrap_or("?"),
        sandbox["memory_mb"],
        sandbox["expires_at"].as_str().unwrap_or("?")
    )
}

pub(crate) async fn spawn(args: SpawnArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.client)?;
    let response = if let Some(template) = &args.template {
        let body = json!({"ttl": args.ttl.clone().unwrap_or_default()});
        client
            .send(
                client
                    .http
                    .post(client.url(&format!("/templates/{template}/spawn")))
                    .json(&body),
            )
            .await?
    } else {
        let body = json!({
            "image": args.image.clone().unwrap_or_default(),
            "ttl": args.ttl.clone().unwrap_or_default(),
            "memory_mb": args.memory_mb.unwrap_or(0),
        });
        client
            .send(client.http.post(client.url("/sandboxes")).json(&body))
            .await?
    };
    let sandbox: Value = response.json().await?;
    if client.json {
        output::line(&serde_json::to_string_pretty(&sandbox)?);
    } else {
        output::line(sandbox["id"].as_str().unwrap_or("?"));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn list(args: ClientArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args)?;
    let sandboxes = client.get_json("/sandboxes").await?;
    if client.json {
        output::line(&serde_json::to_string_pretty(&sandboxes)?);
    } else if sandboxes.as_array().is_none_or(Vec::is_empty) {
        output::note("no sandboxes");
    } else {
        for sandbox in sandboxes.as_array().into_iter().flatten() {
            output::line(&sandbox_line(sandbox));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Streams the command's output as it arrives and exits with its exit code (128 plus the
/// signal when one ended it, 124 when it timed out).
pub(crate) async fn exec(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.client)?;
    let (command, rest) = args.command.split_first().context("no command given")?;
    let body = json!({
        "command": command,
        "args": rest,
        "timeout": args.timeout.clone().unwrap_or_default(),
        "workdir": args.workdir.clone().unwrap_or_default(),
        "stream": true,
        "exit_event": true,
    });
    let response = client
        .send(
            client
                .http
                .post(client.url(&format!("/sandboxes/{}/exec", args.id)))
                .json(&body),
        )
        .await?;
    let mut bytes = response.bytes_stream();
    let mut pending: Vec<u8> = Vec::new();
    let mut exit: Option<Value> = None;
    while let Some(chunk) = bytes.next().await {
        pending.extend_from_slice(&chunk.context("lost the connection to the server")?);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let value: Value = serde_json::from_slice(&line)
                .context("the server sent an unreadable output line")?;
            if value["type"] == "exit" {
                exit = Some(value);
            } else if client.json {
                output::line(&value.to_string());
            } else {
                let data = value["data"].as_str().unwrap_or_default();
                output::raw(value["stream"] == "stderr", data.as_bytes())
                    .context("writing output")?;
            }
        }
    }
    let exit = exit
        .context("the output stream ended before the command finished (the sandbox may be gone)")?;
    if client.json {
        output::line(&exit.to_string());
    }
    if exit["timed_out"] == true {
        output::note("forge: command timed out");
        return Ok(ExitCode::from(124));
    }
    if exit["oom_killed"] == true {
        output::note("forge: command killed: out of memory");
    }
    let code = match exit["signal"].as_i64() {
        Some(signal) => 128 + signal,
        None => exit["exit_code"].as_i64().unwrap_or(1),
    };
    Ok(ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)))
}

pub(crate) async fn get(
    args: ClientArgs,
    id: &str,
    path: &str,
    dest: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args)?;
    let response = client
        .send(
            client
                .http
                .get(client.url(&format!("/sandboxes/{id}/files")))
                .query(&[("path", path)]),
        )
        .await?;
    let data = response
        .bytes()
        .await
        .context("reading the file from the server")?;
    if let Some(dest) = dest {
        std::fs::write(&dest, &data).with_context(|| format!("cannot write {}", dest.display()))?;
        output::note(&format!(
            "{} bytes written to {}",
            data.len(),
            dest.display()
        ));
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(&data)?;
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn put(
    args: ClientArgs,
    id: &str,
    source: &Path,
    path: &str,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args)?;
    let data =
        std::fs::read(source).with_context(|| format!("cannot read {}", source.display()))?;
    let size = data.len();
    client
        .send(
            client
                .http
                .put(client.url(&format!("/sandboxes/{id}/files")))
                .query(&[("path", path)])
                .body(data),
        )
        .await?;
    output::note(&format!("{size} bytes written to {id}:{path}"));
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn ls(args: ClientArgs, id: &str, path: &str) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args)?;
    let response = client
        .send(
            client
                .http
                .get(client.url(&format!("/sandboxes/{id}/files/list")))
                .query(&[("path", path)]),
        )
        .await?;
    let files: Value = response.json().await?;
    if client.json {
        output::line(&serde_json::to_string_pretty(&files)?);
        return Ok(ExitCode::SUCCESS);
    }
    for file in files.as_array().into_iter().flatten() {
        let kind = if file["is_dir"] == true { "d" } else { "-" };
        output::line(&format!(
            "{kind} {:>10}  {}  {}",
            file["size"],
            file["mod_time"].as_str().unwrap_or(""),
            file["name"]
                .as_str()
                .or_else(|| file["path"].as_str())
                .unwrap_or("?")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn kill(args: KillArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.client)?;
    for id in &args.ids {
        client
            .send(client.http.delete(client.url(&format!("/sandboxes/{id}"))))
            .await?;
        if !client.json {
            output::note(&format!("{id} destroyed"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn prune(args: ClientArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args)?;
    let pruned = client
        .send(client.http.delete(client.url("/sandboxes")))
        .await?
        .json::<Value>()
        .await?;
    if client.json {
        output::line(&pruned.to_string());
    } else {
        output::note(&format!("{} expired sandboxes destroyed", pruned["pruned"]));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn snapshot(args: SnapshotArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.client)?;
    let body = json!({"name": args.name.clone().unwrap_or_default()});
    let image: Value = client
        .send(
            client
                .http
                .post(client.url(&format!("/sandboxes/{}/snapshot", args.id)))
                .json(&body),
        )
        .await?
        .json()
        .await?;
    if client.json {
        output::line(&serde_json::to_string_pretty(&image)?);
    } else {
        output::line(image["name"].as_str().unwrap_or("?"));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn fork(args: ForkArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.client)?;
    let body = json!({"ttl": args.ttl.clone().unwrap_or_default()});
    let sandbox: Value = client
        .send(
            client
                .http
                .post(client.url(&format!("/sandboxes/{}/fork", args.id)))
                .json(&body),
        )
        .await?
        .json()
        .await?;
    if client.json {
        output::line(&serde_json::to_string_pretty(&sandbox)?);
    } else {
        output::line(sandbox["id"].as_str().unwrap_or("?"));
    }
    Ok(ExitCode::SUCCESS)
}
