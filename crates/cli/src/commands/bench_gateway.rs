//! `forge bench gateway`: what the tool gateway adds to one call. A `read_file` of a 4 KiB
//! file through the gateway (validate the arguments against the schema, decide with the
//! policy, run in the sandbox, record in SQLite and the hash-chained JSONL ledger) is
//! measured in the same run, interleaved, as the same backend operations called directly:
//! `read_file` alone, and `stat` + `read_file`, which is what the gateway's tool asks the
//! sandbox for (the stat enforces the size cap before anything is read).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use forge_gateway::{Gateway, GatewayConfig, Outcome, SessionRequest};
use forge_sandbox::{Backend, JailBackend, JailConfig};
use serde_json::json;

use super::bench::{percentile, progress};
use crate::cli::BenchGatewayArgs;
use crate::output;

/// Latency the gateway may add to a 4 KiB `read_file` at p50, in milliseconds.
const ADDED_P50_TARGET_MS: f64 = 0.2;

#[derive(Debug, Clone, Copy)]
struct Percentiles {
    p50: f64,
    p90: f64,
}

fn percentiles(mut samples: Vec<Duration>) -> Percentiles {
    samples.sort();
    Percentiles {
        p50: percentile(&samples, 0.50),
        p90: percentile(&samples, 0.90),
    }
}

pub(crate) async fn gateway(args: BenchGatewayArgs) -> anyhow::Result<ExitCode> {
    let data_dir = crate::settings::data_dir(&args.data)?;
    let backend = Arc::new(
        JailBackend::new(JailConfig::new(&data_dir))
            .context("cannot set up the sandbox backend")?,
    );
    for note in backend.host_notes() {
        output::warning(&note);
    }
    // The store and ledger are the benchmark's own, so its records never mix with a real
    // server's.
    let state_dir = tempfile::tempdir().context("cannot create a directory for the store")?;
    let store = forge_store::Store::open(&state_dir.path().join("forge.db"))
        .await
        .context("cannot open the state store")?;
    // The default policy's budget of 1000 calls would end the run; the ceilings allow more.
    let calls = u64::try_from(args.iterations.saturating_add(100)).unwrap_or(u64::MAX);
    let mut config = GatewayConfig::new(state_dir.path());
    config.ceilings.call_budget = config.ceilings.call_budget.max(calls);
    let gateway = Gateway::new(backend.clone(), store, config);
    let policy = forge_policy::Policy {
        call_budget: calls,
        ..forge_policy::Policy::default()
    };
    let session = gateway
        .create_session(SessionRequest {
            policy: Some(policy),
            sandbox_id: None,
        })
        .await
        .context("cannot open a gateway session")?;
    let sandbox = session.sandbox_id.clone();
    let id = session.id.to_string();
    let outcome = measure(&gateway, backend.as_ref(), &id, &sandbox, &args).await;
    let _ = gateway.close(&id).await;
    outcome
}

async fn measure(
    gateway: &Gateway,
    backend: &JailBackend,
    session: &str,
    sandbox: &forge_types::SandboxId,
    args: &BenchGatewayArgs,
) -> anyhow::Result<ExitCode> {
    let path = "/workspace/bench.txt";
    let content = "x".repeat(4095) + "\n";
    backend
        .write_file(sandbox, path, content.clone().into_bytes(), None)
        .await
        .context("cannot write the file to read")?;
    let arguments = json!({ "path": path });
    // Warm up every path (connections, the ledger file, SQLite's pages).
    for _ in 0..50 {
        backend.read_file(sandbox, path).await?;
        gateway
            .call(session, "read_file", arguments.clone(), None)
            .await?;
    }
    let bar = progress(args.iterations, "read_file: gateway vs backend");
    let (mut direct, mut direct_stat, mut through) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.iterations {
        let started = Instant::now();
        let bytes = backend.read_file(sandbox, path).await?;
        direct.push(started.elapsed());
        anyhow::ensure!(
            bytes.len() == 4096,
            "the direct read returned {} bytes",
            bytes.len()
        );

        let started = Instant::now();
        backend.stat(sandbox, path).await?;
        backend.read_file(sandbox, path).await?;
        direct_stat.push(started.elapsed());

        let started = Instant::now();
        let reply = gateway
            .call(session, "read_file", arguments.clone(), None)
            .await?;
        through.push(started.elapsed());
        anyhow::ensure!(
            reply.outcome == Outcome::Ok && reply.result["bytes"] == json!(4096),
            "the gateway's read failed: {}",
            reply.text()
        );
        bar.inc(1);
    }
    bar.finish_and_clear();
    let (direct, direct_stat, through) = (
        percentiles(direct),
        percentiles(direct_stat),
        percentiles(through),
    );
    let added = through.p50 - direct_stat.p50;
    if args.json {
        output::line(&serde_json::to_string_pretty(&json!({
            "iterations": args.iterations,
            "backend_read_ms": {"p50": direct.p50, "p90": direct.p90},
            "backend_stat_read_ms": {"p50": direct_stat.p50, "p90": direct_stat.p90},
            "gateway_read_file_ms": {"p50": through.p50, "p90": through.p90},
            "added_p50_ms": added,
            "added_p50_vs_read_ms": through.p50 - direct.p50,
            "target_added_p50_ms": ADDED_P50_TARGET_MS,
        }))?);
    } else {
        let row = |name: &str, p: Percentiles| {
            [
                name.to_owned(),
                format!("{:.3}", p.p50),
                format!("{:.3}", p.p90),
            ]
        };
        output::table(
            &["read of a 4 KiB file", "p50 ms", "p90 ms"],
            &[
                row("backend read_file", direct),
                row("backend stat + read_file", direct_stat),
                row("gateway read_file", through),
            ],
        );
        output::line(&format!(
            "gateway adds {added:.3} ms at p50 over the same backend operations ({:.3} ms over a bare read); target <= {ADDED_P50_TARGET_MS} ms: {}",
            through.p50 - direct.p50,
            if added <= ADDED_P50_TARGET_MS {
                "met"
            } else {
                "missed"
            }
        ));
    }
    Ok(ExitCode::SUCCESS)
}
