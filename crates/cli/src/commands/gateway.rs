//! `forge tools` and `forge ledger`: the tool gateway from the command line. Listing tools,
//! calling one and tailing the ledger talk to a running server; `ledger verify` reads the
//! ledger file of a data directory directly, so it works with the server stopped.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::client::Client;
use crate::cli::{ClientArgs, DataDirArg};
use crate::output;

pub(crate) async fn tools_ls(
    args: ClientArgs,
    session: Option<String>,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args)?;
    let path = match &session {
        Some(id) => format!("/tools?session={id}"),
        None => "/tools".to_owned(),
    };
    let tools = client.get_json(&path).await?;
    if client.json {
        output::line(&serde_json::to_string_pretty(&tools)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 2]> = tools
        .as_array()
        .into_iter()
        .flatten()
        .map(|tool| {
            [
                tool["name"].as_str().unwrap_or("?").to_owned(),
                tool["description"].as_str().unwrap_or_default().to_owned(),
            ]
        })
        .collect();
    output::table(&["TOOL", "DESCRIPTION"], &rows);
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn tools_call(
    args: ClientArgs,
    tool: &str,
    session: &str,
    arguments: &str,
    idempotency_key: Option<String>,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args)?;
    let arguments: Value = serde_json::from_str(arguments).context("--args is not valid JSON")?;
    let body = json!({
        "session_id": session,
        "arguments": arguments,
        "idempotency_key": idempotency_key,
    });
    let response = client
        .http
        .post(client.url(&format!("/tools/{tool}")))
        .json(&body)
        .send()
        .await
        .context("cannot reach the Forge server")?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    // Denied, pending and invalid calls answer an error body that carries the reply.
    let reply = if answer.get("reply").is_some() {
        &answer["reply"]
    } else {
        &answer
    };
    if reply.get("outcome").is_none() {
        let message = answer["message"].as_str().unwrap_or("no details");
        anyhow::bail!("the server answered {status}: {message}");
    }
    let ok = reply["outcome"] == json!("ok");
    if client.json {
        output::line(&serde_json::to_string_pretty(reply)?);
    } else if ok {
        output::line(&serde_json::to_string_pretty(&reply["result"])?);
    } else {
        let message = answer["message"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| reply["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_default();
        output::warning(&format!(
            "{tool} {}: {message}",
            reply["outcome"].as_str().unwrap_or("failed")
        ));
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub(crate) async fn ledger_tail(
    args: ClientArgs,
    session: Option<String>,
    lines: u32,
) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args)?;
    let path = match &session {
        Some(id) => format!("/ledger?limit={lines}&session={id}"),
        None => format!("/ledger?limit={lines}"),
    };
    let entries = client.get_json(&path).await?;
    if client.json {
        output::line(&serde_json::to_string_pretty(&entries)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 7]> = entries
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            let text = |key: &str| entry[key].as_str().unwrap_or("-").to_owned();
            [
                entry["seq"].to_string(),
                text("session_id"),
                text("tool"),
                text("outcome"),
                text("decision"),
                text("rule"),
                format!("{}us", entry["duration_us"]),
            ]
        })
        .collect();
    output::table(
        &[
            "SEQ", "SESSION", "TOOL", "OUTCOME", "DECISION", "RULE", "TIME",
        ],
        &rows,
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn ledger_verify(data: &DataDirArg, json: bool) -> anyhow::Result<ExitCode> {
    let dir = crate::settings::data_dir(data)?;
    let path = forge_gateway::GatewayConfig::ledger_path(&dir);
    // The store's last record catches lines cut from the end of the file, which the chain
    // alone cannot see.
    let db = dir.join("forge.db");
    let expected = if db.exists() {
        let store = forge_store::Store::open(&db)
            .await
            .with_context(|| format!("cannot open {}", db.display()))?;
        let last = store
            .ledger(None, 1)
            .await
            .context("cannot read the ledger from the store")?
            .pop();
        store.close().await;
        last.map(|record| (u64::try_from(record.seq).unwrap_or(0), record.hash))
    } else {
        None
    };
    let checked = tokio::task::spawn_blocking(move || {
        forge_gateway::verify(
            &path,
            expected.as_ref().map(|(seq, hash)| (*seq, hash.as_str())),
        )
    })
    .await
    .context("the verification was interrupted")?;
    match checked {
        Ok(report) => {
            if json {
                output::line(&serde_json::to_string_pretty(
                    &json!({"ok": true, "lines": report.lines, "last_hash": report.last_hash}),
                )?);
            } else {
                output::line(&format!(
                    "ledger intact: {} lines, last hash {}",
                    report.lines, report.last_hash
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(forge_gateway::VerifyError::BadLine { line, reason }) => {
            if json {
                output::line(&serde_json::to_string_pretty(
                    &json!({"ok": false, "line": line, "reason": reason}),
                )?);
            } else {
                output::warning(&format!("ledger tampered at line {line}: {reason}"));
            }
            Ok(ExitCode::FAILURE)
        }
        Err(error) => Err(error.into()),
    }
}
