//! `forge bench net`: what the egress proxy costs. A download from a loopback HTTP server
//! (100 MB by default) and small requests, by curl inside an allowlist sandbox through the
//! proxy, against the same curl on the host connecting directly, in one run. Timings are
//! curl's own (`speed_download`, `time_total`), so sandbox exec overhead is not counted.

use std::net::SocketAddr;
use std::process::{ExitCode, Stdio};

use anyhow::Context;
use forge_sandbox::{Backend, JailBackend, JailConfig};
use forge_types::{ExecRequest, NetworkMode, SandboxId, SandboxSpec};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cli::BenchNetArgs;
use crate::output;

/// The target: the proxy keeps at least this share of direct throughput.
const TARGET: f64 = 0.5;

/// Where the stand-in internet listens: loopback, but not the address sandboxes' names
/// would be refused for, and listed by address in the sandbox's allowlist.
const SERVER: [u8; 4] = [127, 0, 0, 2];

/// Serves `GET /big` (`size` bytes) and anything else (2 bytes), one request per connection.
async fn serve(listener: tokio::net::TcpListener, size: u64) {
    let chunk = vec![b'x'; 1 << 20];
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let chunk = chunk.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let big = head.starts_with(b"GET /big");
            let len = if big { size } else { 2 };
            let header =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n");
            if stream.write_all(header.as_bytes()).await.is_err() {
                return;
            }
            let mut left = len;
            while left > 0 {
                let n = usize::try_from(left.min(chunk.len() as u64)).unwrap_or(chunk.len());
                if stream.write_all(&chunk[..n]).await.is_err() {
                    return;
                }
                left -= n as u64;
            }
            let _ = stream.shutdown().await;
        });
    }
}

/// One curl invocation's numbers: `speed_download` (bytes/s) and `time_total` (s).
fn parse_curl(output: &str) -> anyhow::Result<Vec<(f64, f64)>> {
    output
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut fields = line.split_whitespace().map(str::parse::<f64>);
            match (fields.next(), fields.next()) {
                (Some(Ok(speed)), Some(Ok(total))) => Ok((speed, total)),
                _ => anyhow::bail!("unexpected curl output {line:?}"),
            }
        })
        .collect()
}

/// The shell loop both sides run: `count` fetches of `url`, one line of numbers each.
fn script(url: &str, count: usize, proxy: bool) -> String {
    let noproxy = if proxy { "" } else { "--noproxy '*'" };
    format!(
        "for i in $(seq {count}); do curl -sS {noproxy} -o /dev/null -w '%{{speed_download}} %{{time_total}}\\n' {url} || exit 1; done"
    )
}

async fn direct(script: &str) -> anyhow::Result<Vec<(f64, f64)>> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the baseline is a plain client on the host, outside any sandbox on purpose"
    )]
    let mut command = std::process::Command::new("/bin/sh");
    command.args(["-c", script]).stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .context("the host's curl waiter panicked")?
        .context("cannot run curl on the host")?;
    anyhow::ensure!(
        output.status.success(),
        "curl on the host failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_curl(&String::from_utf8_lossy(&output.stdout))
}

async fn proxied(
    backend: &JailBackend,
    id: &SandboxId,
    script: &str,
) -> anyhow::Result<Vec<(f64, f64)>> {
    let result = backend.exec(id, ExecRequest::shell(script)).await?;
    anyhow::ensure!(
        result.success(),
        "curl in the sandbox failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    parse_curl(&String::from_utf8_lossy(&result.stdout))
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub(crate) async fn net(args: BenchNetArgs) -> anyhow::Result<ExitCode> {
    let data_dir = crate::settings::data_dir(&args.data)?;
    let backend = JailBackend::new(JailConfig::new(&data_dir))
        .context("cannot set up the sandbox backend")?;
    let size = args.megabytes.max(1) * 1_000_000;
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((SERVER, 0)))
        .await
        .context("cannot listen on 127.0.0.2")?;
    let addr = listener.local_addr().context("cannot read the address")?;
    let server = tokio::spawn(serve(listener, size));
    let info = backend
        .create(SandboxSpec {
            network: NetworkMode::Allowlist,
            allowed_hosts: vec![format!("{}/32", addr.ip())],
            ..SandboxSpec::default()
        })
        .await
        .context("cannot create an allowlist sandbox")?;
    let big = format!("http://{addr}/big");
    let small = format!("http://{addr}/small");
    let rounds = args.rounds.max(1);
    let outcome = async {
        let (mut direct_speed, mut proxy_speed) = (Vec::new(), Vec::new());
        // Rounds alternate which side goes first, so neither always runs on a warmer cache.
        for round in 0..rounds {
            for step in 0..2 {
                if (round + step) % 2 == 0 {
                    direct_speed.extend(direct(&script(&big, 1, false)).await?);
                } else {
                    proxy_speed.extend(proxied(&backend, &info.id, &script(&big, 1, true)).await?);
                }
            }
        }
        let requests = args.requests.max(1);
        let direct_small = direct(&script(&small, requests, false)).await?;
        let proxy_small = proxied(&backend, &info.id, &script(&small, requests, true)).await?;
        anyhow::Ok((direct_speed, proxy_speed, direct_small, proxy_small))
    }
    .await;
    let _ = backend.destroy(&info.id).await;
    server.abort();
    backend.settle().await?;
    let (direct_speed, proxy_speed, direct_small, proxy_small) = outcome?;
    let mb = |v: Vec<(f64, f64)>| median(v.into_iter().map(|(s, _)| s / 1e6).collect());
    let ms = |v: Vec<(f64, f64)>| median(v.into_iter().map(|(_, t)| t * 1000.0).collect());
    let (direct_rate, proxy_rate) = (mb(direct_speed), mb(proxy_speed));
    let (direct_latency, proxy_latency) = (ms(direct_small), ms(proxy_small));
    let ratio = proxy_rate / direct_rate;
    if args.json {
        let report = json!({
            "megabytes": args.megabytes,
            "rounds": rounds,
            "requests": args.requests,
            "direct": {"throughput_mb_s": direct_rate, "request_ms_p50": direct_latency},
            "proxy": {"throughput_mb_s": proxy_rate, "request_ms_p50": proxy_latency},
            "throughput_ratio": ratio,
            "added_latency_ms": proxy_latency - direct_latency,
            "target": TARGET,
        });
        output::line(&serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    output::line(&format!(
        "forge bench net: {} MB download (median of {rounds}) and {} small requests (p50), curl's timings",
        args.megabytes, args.requests
    ));
    output::line(&format!(
        "{:<40} {:>12} {:>14}",
        "path", "throughput", "request p50"
    ));
    output::line(&format!(
        "{:<40} {:>7.0} MB/s {:>11.2} ms",
        "direct (curl on the host)", direct_rate, direct_latency
    ));
    output::line(&format!(
        "{:<40} {:>7.0} MB/s {:>11.2} ms",
        "egress proxy (curl in an allowlist sandbox)", proxy_rate, proxy_latency
    ));
    output::line(&format!(
        "proxy throughput {:.0}% of direct ({} target ≥ {:.0}%), added latency {:.2} ms",
        ratio * 100.0,
        if ratio >= TARGET { "meets" } else { "misses" },
        TARGET * 100.0,
        proxy_latency - direct_latency
    ));
    Ok(ExitCode::SUCCESS)
}
