//! `forge sandbox run`: one command in a fresh sandbox, like `docker run --rm`.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use anyhow::{Context, bail};
use forge_sandbox::{Backend, JailBackend, JailConfig};
use forge_types::units::{parse_duration, parse_size};
use forge_types::{ExecEvent, ExecRequest, Limits, SandboxSpec, StreamKind};
use futures::StreamExt;

use crate::cli::RunArgs;
use crate::output;

/// Builds a spec from the flags, naming the flag that is wrong.
fn spec_from(args: &RunArgs) -> anyhow::Result<SandboxSpec> {
    let mut limits = Limits::default();
    if let Some(memory) = &args.memory {
        limits.memory_bytes = parse_size(memory).with_context(|| {
            format!("invalid --memory {memory:?}: expected a size such as 256M or 1G")
        })?;
    }
    if let Some(pids) = &args.pids {
        limits.pids = pids.parse().with_context(|| {
            format!("invalid --pids {pids:?}: expected a positive whole number")
        })?;
    }
    if let Some(cpus) = &args.cpus {
        let value: f64 = cpus
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .with_context(|| {
                format!("invalid --cpus {cpus:?}: expected a positive number such as 1 or 0.5")
            })?;
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked positive and finite"
        )]
        let millis = (value * 1000.0).round() as u32;
        limits.cpu_millis = millis.max(1);
    }
    let mut env = std::collections::BTreeMap::new();
    for pair in &args.env {
        let Some((name, value)) = pair.split_once('=') else {
            bail!("invalid --env {pair:?}: expected NAME=VALUE");
        };
        env.insert(name.to_owned(), value.to_owned());
    }
    let workspace = args
        .workspace
        .as_ref()
        .map(|dir| {
            std::fs::canonicalize(dir)
                .with_context(|| format!("invalid --workspace {}", dir.display()))
        })
        .transpose()?;
    let mut network = args
        .network
        .parse()
        .map_err(|err: forge_types::SpecError| {
            anyhow::anyhow!("invalid --network: {}", err.reason)
        })?;
    if !args.allow.is_empty() && network == forge_types::NetworkMode::None {
        network = forge_types::NetworkMode::Allowlist;
    }
    let spec = SandboxSpec {
        image: args.image.clone(),
        limits,
        network,
        allowed_hosts: args.allow.clone(),
        workspace,
        env,
        ..SandboxSpec::default()
    };
    spec.validate().map_err(|err| {
        let flag = match err.field {
            "limits.memory_bytes" => "--memory",
            "limits.pids" => "--pids",
            "limits.cpu_millis" => "--cpus",
            "image" => "--image",
            "workspace" => "--workspace",
            "env" => "--env",
            "allowed_hosts" => "--allow",
            other => other,
        };
        anyhow::anyhow!("invalid {flag}: {}", err.reason)
    })?;
    Ok(spec)
}

pub(crate) async fn run(args: Box<RunArgs>) -> anyhow::Result<ExitCode> {
    let spec = spec_from(&args)?;
    let timeout = args
        .timeout
        .as_deref()
        .map(|t| {
            parse_duration(t).with_context(|| {
                format!("invalid --timeout {t:?}: expected a duration such as 10s or 2m")
            })
        })
        .transpose()?;
    let stdin = if std::io::stdin().is_terminal() {
        None
    } else {
        let mut data = Vec::new();
        std::io::stdin()
            .read_to_end(&mut data)
            .context("reading stdin")?;
        Some(data)
    };
    let data_dir = crate::settings::data_dir(&args.data)?;
    let backend = JailBackend::new(JailConfig {
        registries: crate::settings::registries(args.config.as_deref())?,
        ..JailConfig::new(&data_dir)
    })
    .context("cannot set up the sandbox backend")?;
    let info = backend
        .create(spec)
        .await
        .context("cannot create the sandbox")?;
    for note in &info.degraded {
        output::warning(note);
    }
    let mut request = ExecRequest::argv(args.command.clone());
    request.stdin = stdin;
    request.cwd.clone_from(&args.workdir);
    request.timeout_ms = timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
    let outcome = tokio::select! {
        outcome = stream_command(&backend, &info.id, request) => outcome,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    let destroyed = backend.destroy(&info.id).await;
    let settled = backend.settle().await;
    let result = outcome?;
    destroyed.with_context(|| format!("cannot remove sandbox {}", info.id))?;
    settled.context("cannot clean up after the sandbox")?;
    if result.timed_out {
        output::note(&format!(
            "forge: command timed out after {}",
            args.timeout.as_deref().unwrap_or("?")
        ));
        return Ok(ExitCode::from(124));
    }
    if result.oom_killed {
        output::note(&format!(
            "forge: command killed: out of memory (limit {})",
            forge_types::units::format_size(info.spec.limits.memory_bytes)
        ));
    }
    Ok(ExitCode::from(
        u8::try_from(result.exit_code & 0xff).unwrap_or(1),
    ))
}

async fn stream_command(
    backend: &JailBackend,
    id: &forge_types::SandboxId,
    request: ExecRequest,
) -> anyhow::Result<forge_types::ExecResult> {
    let mut events = backend
        .exec_stream(id, request)
        .await
        .context("cannot run the command")?;
    while let Some(event) = events.next().await {
        match event.context("lost the command's output")? {
            ExecEvent::Output { stream, data } => {
                output::raw(stream == StreamKind::Stderr, &data).context("writing output")?;
            }
            ExecEvent::Exit(result) => return Ok(result),
        }
    }
    bail!("the sandbox closed the output stream before the command finished")
}
