//! `forge bench sandbox`: the jail's latencies and density, each measured in the same run
//! as its baseline (a plain spawn of `/bin/true`, and bubblewrap with a comparable profile)
//! and reported as ratios, since timings on shared machines only compare within one run.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use forge_sandbox::{Backend, JailBackend, JailConfig, Pool};
use forge_types::{ExecRequest, SandboxSpec};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::cli::BenchSandboxArgs;
use crate::output;

/// Percentiles of one measurement, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Summary {
    pub(super) p50: f64,
    pub(super) p99: f64,
}

pub(super) fn summarise(mut samples: Vec<Duration>) -> Summary {
    samples.sort();
    Summary {
        p50: percentile(&samples, 0.50),
        p99: percentile(&samples, 0.99),
    }
}

/// The `q` quantile of `sorted` samples in milliseconds (nearest rank); NaN when empty.
pub(super) fn percentile(sorted: &[Duration], q: f64) -> f64 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short vector"
    )]
    let index = ((sorted.len().saturating_sub(1) as f64) * q).round() as usize;
    sorted
        .get(index)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
}

pub(super) fn progress(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{msg:<40} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar
}

fn spawn_and_wait(program: &Path, args: &[&str]) -> anyhow::Result<()> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the benchmark's baselines run outside any sandbox on purpose"
    )]
    let status = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", program.display()))?;
    anyhow::ensure!(
        status.success(),
        "{} {} failed: {status}",
        program.display(),
        args.join(" ")
    );
    Ok(())
}

fn find_program(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
}

/// Memory in use system-wide (`MemTotal` - `MemAvailable`), in bytes.
fn memory_in_use() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    field("MemTotal:").saturating_sub(field("MemAvailable:"))
}

/// Proportional set size of a process, in bytes.
fn pss(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

pub(crate) async fn sandbox(args: BenchSandboxArgs) -> anyhow::Result<ExitCode> {
    let iterations = args.iterations.max(10);
    let data_dir = crate::settings::data_dir(&args.data)?;
    let backend = JailBackend::new(JailConfig::new(&data_dir))
        .context("cannot set up the sandbox backend")?;
    let true_path = Path::new("/bin/true");

    let workspace = tempfile::tempdir().context("cannot create a workspace for bubblewrap")?;
    let dir = workspace.path().to_string_lossy().into_owned();
    let bwrap = find_program("bwrap");
    if bwrap.is_none() {
        output::warning(
            "bwrap is not installed (apt-get install bubblewrap); the bubblewrap baseline is skipped",
        );
    }
    let profile = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/sbin",
        "/sbin",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--bind",
        &dir,
        "/workspace",
        "/bin/true",
    ];
    if args.breakdown {
        let mut firsts = Vec::new();
        let mut seconds = Vec::new();
        let mut creates = Vec::new();
        let mut destroys = Vec::new();
        for _ in 0..iterations {
            // From a quiet machine, as the cold measurement: the last sandbox's cleanup and
            // the helper's stocking done.
            backend.quiesce().await?;
            let t = Instant::now();
            let info = backend.create(SandboxSpec::default()).await?;
            creates.push(t.elapsed());
            let t = Instant::now();
            backend
                .exec(&info.id, ExecRequest::argv(["/bin/true"]))
                .await?;
            firsts.push(t.elapsed());
            let t = Instant::now();
            backend
                .exec(&info.id, ExecRequest::argv(["/bin/true"]))
                .await?;
            seconds.push(t.elapsed());
            let t = Instant::now();
            backend.destroy(&info.id).await?;
            destroys.push(t.elapsed());
        }
        let s = |v: Vec<Duration>| summarise(v).p50;
        output::line(&format!(
            "cold start, step by step (p50 of {iterations} runs):"
        ));
        output::line(&format!(
            "create {:.2} ms, first exec {:.2} ms, second exec {:.2} ms, destroy {:.2} ms",
            s(creates),
            s(firsts),
            s(seconds),
            s(destroys)
        ));
        backend.settle().await?;
        return Ok(ExitCode::SUCCESS);
    }
    let shared: Arc<dyn Backend> = Arc::new(backend.clone());
    let pool = Pool::new(shared, SandboxSpec::default(), 4);
    let warm_sandbox = backend.create(SandboxSpec::default()).await?;
    pool.wait_full(Duration::from_secs(30)).await;

    // Every iteration measures each subject once, in a rotating order, so that baselines and
    // subjects see the same machine: timings on a shared machine drift within one run. Before
    // each measurement the machine is quiesced: the pool is full, the janitor has removed
    // what destroyed sandboxes left (that cleanup, off the caller's path, is timed apart) and
    // the helper has stocked its network namespaces.
    let mut samples: [Vec<Duration>; 5] = Default::default();
    let mut cleanup = Vec::with_capacity(iterations);
    let bar = progress(iterations, "plain, bubblewrap, cold, pooled, warm");
    for iteration in 0..iterations {
        for step in 0..5 {
            let which = (iteration + step) % 5;
            pool.wait_full(Duration::from_secs(30)).await;
            backend.quiesce().await?;
            let elapsed = match which {
                0 => {
                    let started = Instant::now();
                    spawn_and_wait(true_path, &[])?;
                    started.elapsed()
                }
                1 => match &bwrap {
                    Some(bwrap) => {
                        let started = Instant::now();
                        spawn_and_wait(bwrap, &profile)?;
                        started.elapsed()
                    }
                    None => continue,
                },
                2 => {
                    let started = Instant::now();
                    let info = backend.create(SandboxSpec::default()).await?;
                    let result = backend
                        .exec(&info.id, ExecRequest::argv(["/bin/true"]))
                        .await?;
                    backend.destroy(&info.id).await?;
                    let elapsed = started.elapsed();
                    let cleaning = Instant::now();
                    backend.settle().await?;
                    cleanup.push(cleaning.elapsed());
                    anyhow::ensure!(
                        result.success(),
                        "/bin/true failed in a sandbox: {result:?}"
                    );
                    elapsed
                }
                3 => {
                    let started = Instant::now();
                    let info = pool.acquire().await?;
                    let result = backend
                        .exec(&info.id, ExecRequest::argv(["/bin/true"]))
                        .await?;
                    pool.release(info.id);
                    let elapsed = started.elapsed();
                    anyhow::ensure!(result.success(), "/bin/true failed in a pooled sandbox");
                    elapsed
                }
                _ => {
                    let started = Instant::now();
                    let result = backend
                        .exec(&warm_sandbox.id, ExecRequest::argv(["/bin/true"]))
                        .await?;
                    let elapsed = started.elapsed();
                    anyhow::ensure!(result.success(), "/bin/true failed in a warm sandbox");
                    elapsed
                }
            };
            samples[which].push(elapsed);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    pool.shutdown().await;
    backend.destroy(&warm_sandbox.id).await?;
    backend.settle().await?;
    let [plain, bwrap_samples, cold, pooled, warm] = samples;
    let plain = summarise(plain);
    let bwrap = (!bwrap_samples.is_empty()).then(|| summarise(bwrap_samples));
    let cold = summarise(cold);
    let cleanup = summarise(cleanup);
    let pooled = summarise(pooled);
    let warm = summarise(warm);

    // Density: idle sandboxes alive at once.
    let density = if args.density > 0 {
        Some(density(&backend, args.density).await?)
    } else {
        None
    };

    // Pool sandboxes released last are destroyed in the background; wait for them.
    for _ in 0..500 {
        if backend.list().await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    backend.settle().await?;

    let ratio = |a: Summary, b: Option<Summary>| b.map(|b| a.p50 / b.p50);
    let report = json!({
        "iterations": iterations,
        "plain_spawn_ms": {"p50": plain.p50, "p99": plain.p99},
        "bubblewrap_ms": bwrap.map(|b| json!({"p50": b.p50, "p99": b.p99})),
        "cold_ms": {"p50": cold.p50, "p99": cold.p99, "vs_bubblewrap": ratio(cold, bwrap), "target": 0.8},
        "cold_cleanup_ms": {"p50": cleanup.p50, "p99": cleanup.p99},
        "pooled_ms": {"p50": pooled.p50, "p99": pooled.p99, "vs_bubblewrap": ratio(pooled, bwrap), "target": 0.25},
        "warm_exec_ms": {"p50": warm.p50, "p99": warm.p99, "vs_plain_spawn": warm.p50 / plain.p50, "target": 1.5},
        "density": density.as_ref().map(|d| json!({
            "sandboxes": d.count,
            "bytes_per_sandbox": d.per_sandbox,
            "init_pss_bytes": d.init_pss,
            "target_bytes": 1 << 20,
        })),
    });
    if args.json {
        output::line(&serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let uname = rustix::system::uname();
    output::line(&format!(
        "forge bench sandbox: {iterations} iterations, Linux {}, {} CPUs",
        uname.release().to_string_lossy(),
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    ));
    output::line(&format!(
        "{:<40} {:>9} {:>9}   {}",
        "measurement", "p50", "p99", "ratio of p50"
    ));
    let row = |name: &str, s: Summary, note: String| {
        output::line(&format!(
            "{name:<40} {:>6.2} ms {:>6.2} ms   {note}",
            s.p50, s.p99
        ));
    };
    let verdict = |value: f64, target: f64| if value <= target { "meets" } else { "misses" };
    row("plain spawn of /bin/true", plain, "baseline".into());
    if let Some(b) = bwrap {
        row("bubblewrap /bin/true", b, "baseline".into());
    }
    let vs_bwrap = |s: Summary, target: f64| match bwrap {
        Some(b) => format!(
            "{:.2}× bubblewrap ({} target ≤ {target}×)",
            s.p50 / b.p50,
            verdict(s.p50 / b.p50, target)
        ),
        None => "no bubblewrap baseline".to_owned(),
    };
    row(
        "jail cold: create + exec + destroy",
        cold,
        vs_bwrap(cold, 0.8),
    );
    row(
        "  then cleanup, off the caller's path",
        cleanup,
        "the janitor: init gone, uid range freed, directory and cgroups removed".into(),
    );
    row(
        "jail pooled: acquire + exec + release",
        pooled,
        vs_bwrap(pooled, 0.25),
    );
    let warm_ratio = warm.p50 / plain.p50;
    row(
        "jail warm exec",
        warm,
        format!(
            "{warm_ratio:.2}× plain spawn ({} target ≤ 1.5×)",
            verdict(warm_ratio, 1.5)
        ),
    );
    if let Some(d) = density {
        #[expect(clippy::cast_precision_loss, reason = "display")]
        let mib = d.per_sandbox as f64 / f64::from(1 << 20);
        output::line(&format!(
            "density: {} idle sandboxes at once: {:.2} MiB each (init PSS {}; the rest is kernel: namespaces, mounts, cgroups) ({} target ≤ 1 MiB)",
            d.count,
            mib,
            forge_types::units::format_size(d.init_pss),
            verdict(mib, 1.0)
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Memory per idle sandbox.
struct Density {
    count: usize,
    per_sandbox: u64,
    init_pss: u64,
}

async fn density(backend: &JailBackend, count: usize) -> anyhow::Result<Density> {
    // Dropping caches first makes the before/after difference mostly the sandboxes'.
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = memory_in_use();
    let bar = progress(count, "density: starting idle sandboxes");
    let mut ids = Vec::with_capacity(count);
    let mut outcome = Ok(());
    for _ in 0..count {
        match backend.create(SandboxSpec::default()).await {
            Ok(info) => ids.push(info),
            Err(err) => {
                outcome = Err(anyhow::Error::new(err)
                    .context(format!("starting sandbox {} of {count}", ids.len() + 1)));
                break;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = memory_in_use();
    let pss_total: u64 = ids.iter().map(|info| pss(info.init_pid)).sum();
    let bar = progress(ids.len(), "density: removing them");
    for info in &ids {
        backend.destroy(&info.id).await?;
        bar.inc(1);
    }
    backend.settle().await?;
    bar.finish_and_clear();
    outcome?;
    let n = ids.len().max(1) as u64;
    Ok(Density {
        count: ids.len(),
        per_sandbox: after.saturating_sub(before) / n,
        init_pss: pss_total / n,
    })
}
