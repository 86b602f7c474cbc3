//! `forge bench image`: what an image's layers cost a cold start, against the host base in
//! the same run (create, run `/bin/true`, destroy; the two alternate every iteration).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use forge_sandbox::{Backend, JailBackend, JailConfig};
use forge_types::{ExecRequest, SandboxSpec};
use serde_json::json;

use super::bench::{Summary, progress, summarise};
use crate::cli::BenchImageArgs;
use crate::output;

/// The target: an image's overlay may make a cold start at most this much slower.
const TARGET: f64 = 1.2;

pub(crate) async fn image(args: BenchImageArgs) -> anyhow::Result<ExitCode> {
    let iterations = args.iterations.max(10);
    let data_dir = crate::settings::data_dir(&args.data)?;
    let backend = JailBackend::new(JailConfig {
        registries: crate::settings::registries(None)?,
        ..JailConfig::new(&data_dir)
    })
    .context("cannot set up the sandbox backend")?;
    let image = backend
        .image_store()
        .get(&args.image)
        .with_context(|| format!("cannot benchmark {}", args.image))?;
    let specs = [
        SandboxSpec::default(),
        SandboxSpec {
            image: args.image.clone(),
            ..SandboxSpec::default()
        },
    ];
    // One of each first: page caches warm, the first spawn's one-off costs paid.
    for spec in &specs {
        cold_start(&backend, spec)
            .await
            .with_context(|| format!("cannot start a sandbox on {}", spec.image))?;
    }
    let mut samples: [Vec<std::time::Duration>; 2] = Default::default();
    let bar = progress(iterations, "host base, image");
    for iteration in 0..iterations {
        for step in 0..2 {
            let which = (iteration + step) % 2;
            backend.quiesce().await?;
            samples[which].push(cold_start(&backend, &specs[which]).await?);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    backend.settle().await?;
    let [host, layered] = samples;
    let host = summarise(host);
    let layered = summarise(layered);
    let ratio = layered.p50 / host.p50;
    if args.json {
        let report = json!({
            "iterations": iterations,
            "image": image.name(),
            "layers": image.layers.len(),
            "host_ms": {"p50": host.p50, "p99": host.p99},
            "image_ms": {"p50": layered.p50, "p99": layered.p99, "vs_host": ratio, "target": TARGET},
        });
        output::line(&serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    output::line(&format!(
        "forge bench image: cold start (create, /bin/true, destroy), {iterations} iterations"
    ));
    output::line(&format!(
        "{:<44} {:>9} {:>9}   {}",
        "measurement", "p50", "p99", "against the host base"
    ));
    let row = |name: &str, s: Summary, note: &str| {
        output::line(&format!(
            "{name:<44} {:>6.2} ms {:>6.2} ms   {note}",
            s.p50, s.p99
        ));
    };
    row("host base", host, "baseline");
    row(
        &format!("{} ({} layers)", image.name(), image.layers.len()),
        layered,
        &format!(
            "{ratio:.2}× ({} target ≤ {TARGET}×)",
            if ratio <= TARGET { "meets" } else { "misses" }
        ),
    );
    Ok(ExitCode::SUCCESS)
}

async fn cold_start(
    backend: &JailBackend,
    spec: &SandboxSpec,
) -> anyhow::Result<std::time::Duration> {
    let started = Instant::now();
    let info = backend.create(spec.clone()).await?;
    let result = backend
        .exec(&info.id, ExecRequest::argv(["/bin/true"]))
        .await?;
    backend.destroy(&info.id).await?;
    let elapsed = started.elapsed();
    anyhow::ensure!(
        result.success(),
        "/bin/true failed on {}: {}",
        spec.image,
        String::from_utf8_lossy(&result.stderr)
    );
    Ok(elapsed)
}
