//! `forge bench server`: what the HTTP API costs on top of the sandbox backend. The real
//! app (router, middleware, store, event writer) serves on a loopback socket inside this
//! process, a keep-alive HTTP client drives it the way an SDK would, and every HTTP figure
//! is measured in the same run, interleaved, as the same `JailBackend` called directly,
//! since timings on shared machines only compare within one run.
//!
//! Client, server and sandboxes share this machine's cores, so the HTTP figures include the
//! client's own work (serialising the request, parsing the answer), as an SDK user sees it.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use forge_sandbox::{Backend, JailBackend, JailConfig};
use forge_server::{AppState, ServerConfig};
use forge_types::{ExecRequest, SandboxId, SandboxSpec};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::bench::{Summary, progress, summarise};
use crate::cli::BenchServerArgs;
use crate::output;

/// Added latency the HTTP API may cost a warm exec at p50, in milliseconds.
const ADDED_P50_TARGET_MS: f64 = 0.3;
/// Execs per second the HTTP API should sustain across many sandboxes.
const THROUGHPUT_TARGET: f64 = 1000.0;

/// A client of the API over HTTP, reusing its connections like an SDK.
#[derive(Debug, Clone)]
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn new(addr: SocketAddr) -> anyhow::Result<Self> {
        // No proxy lookup: a proxy from the environment would measure someone else's server.
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("cannot build an HTTP client")?;
        Ok(Self {
            http,
            base: format!("http://{addr}/api/v1"),
        })
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let response = request
            .send()
            .await
            .context("cannot reach the benchmark's server")?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .context("the server's answer is not JSON")?;
        anyhow::ensure!(status.is_success(), "the server answered {status}: {body}");
        Ok(body)
    }

    async fn spawn(&self) -> anyhow::Result<String> {
        let body = self
            .send(
                self.http
                    .post(format!("{}/sandboxes", self.base))
                    .json(&json!({"image": "host"})),
            )
            .await?;
        body["id"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("the spawn answer has no id: {body}"))
    }

    async fn exec(&self, id: &str) -> anyhow::Result<()> {
        let body = self
            .send(
                self.http
                    .post(format!("{}/sandboxes/{id}/exec", self.base))
                    .json(&json!({"command": "/bin/true"})),
            )
            .await?;
        anyhow::ensure!(
            body["exit_code"] == 0,
            "/bin/true failed in sandbox {id} over HTTP: {body}"
        );
        Ok(())
    }

    async fn destroy(&self, id: &str) -> anyhow::Result<()> {
        self.send(self.http.delete(format!("{}/sandboxes/{id}", self.base)))
            .await
            .map(drop)
    }

    async fn health(&self) -> anyhow::Result<()> {
        self.send(self.http.get(format!("{}/health", self.base)))
            .await
            .map(drop)
    }
}

/// The backend and the same backend behind the HTTP API, side by side.
struct Subjects {
    backend: JailBackend,
    state: AppState,
    api: Api,
    /// What the exec handler hands the backend for `{"command":"/bin/true"}`.
    exec: ExecRequest,
}

impl Subjects {
    async fn direct_exec(&self, id: &SandboxId) -> anyhow::Result<()> {
        let result = self.backend.exec(id, self.exec.clone()).await?;
        anyhow::ensure!(
            result.success(),
            "/bin/true failed in sandbox {id}: {result:?}"
        );
        Ok(())
    }

    /// Waits until the machine is idle again: the server's exec log and events written, and
    /// what destroyed sandboxes left removed by the janitor.
    async fn quiesce(&self) -> anyhow::Result<()> {
        self.state.flush().await;
        self.backend.settle().await?;
        Ok(())
    }
}

/// The request the exec handler builds from `{"command":"/bin/true"}`: ForgeVM's semantics
/// run it through `/bin/sh -c`, with the server's default timeout. The direct calls send
/// exactly this, so the difference is the API's alone.
fn handler_request(config: &ServerConfig) -> ExecRequest {
    let mut request = ExecRequest::shell("/bin/true");
    request.timeout_ms = config
        .default_exec_timeout
        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
    request
}

pub(crate) async fn server(args: BenchServerArgs) -> anyhow::Result<ExitCode> {
    let iterations = args.iterations.max(10);
    let warm_iterations = iterations * 5;
    let clients = args.clients.max(1);
    let rounds = args.rounds.max(1);
    let data_dir = crate::settings::data_dir(&args.data)?;
    let backend = JailBackend::new(JailConfig::new(&data_dir))
        .context("cannot set up the sandbox backend")?;
    for note in backend.host_notes() {
        output::warning(&note);
    }
    // The store is the benchmark's own, so its records never mix with a real server's.
    let state_dir = tempfile::tempdir().context("cannot create a directory for the store")?;
    let store = forge_store::Store::open(&state_dir.path().join("forge.db"))
        .await
        .context("cannot open the state store")?;
    let mut config = ServerConfig::new(state_dir.path());
    // No cap on live sandboxes: the throughput measurement holds one per client.
    config.max_sandboxes = None;
    let exec = handler_request(&config);
    let state = AppState::new(Arc::new(backend.clone()), store, config);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .context("cannot listen on loopback")?;
    let addr = listener
        .local_addr()
        .context("cannot read the listening address")?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(forge_server::serve(state.clone(), listener, async move {
        let _ = stopped.await;
    }));
    let subjects = Subjects {
        backend,
        state,
        api: Api::new(addr)?,
        exec,
    };

    let outcome = measure(
        &subjects,
        iterations,
        warm_iterations,
        clients,
        rounds,
        &args,
    )
    .await;

    // Idle keep-alive connections would hold the graceful shutdown open.
    let Subjects { backend, api, .. } = subjects;
    drop(api);
    let _ = stop.send(());
    server
        .await
        .context("the benchmark's server panicked")?
        .context("the benchmark's server stopped with an error")?;
    backend.settle().await?;
    let report = outcome?;
    print(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Everything measured, in milliseconds and execs per second.
#[derive(Debug)]
struct Report {
    iterations: usize,
    warm_iterations: usize,
    clients: usize,
    rounds: usize,
    round: Duration,
    cold_http: Summary,
    cold_direct: Summary,
    warm_http: Summary,
    warm_direct: Summary,
    health: Summary,
    http: Throughput,
    direct: Throughput,
}

async fn measure(
    subjects: &Subjects,
    iterations: usize,
    warm_iterations: usize,
    clients: usize,
    rounds: usize,
    args: &BenchServerArgs,
) -> anyhow::Result<Report> {
    let api = &subjects.api;

    // Spawn + exec + destroy, HTTP and direct in alternating order, each from an idle machine.
    let mut cold: [Vec<Duration>; 2] = Default::default();
    let bar = progress(iterations, "spawn + exec + destroy: http, direct");
    for iteration in 0..iterations {
        for step in 0..2 {
            let which = (iteration + step) % 2;
            subjects.quiesce().await?;
            let started = Instant::now();
            if which == 0 {
                let id = api.spawn().await?;
                api.exec(&id).await?;
                api.destroy(&id).await?;
            } else {
                let info = subjects.backend.create(SandboxSpec::default()).await?;
                subjects.direct_exec(&info.id).await?;
                subjects.backend.destroy(&info.id).await?;
            }
            cold[which].push(started.elapsed());
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    subjects.quiesce().await?;

    // Warm exec in one sandbox, shared by both paths; `/health` is the HTTP stack alone.
    let warm_id = api.spawn().await?;
    let warm_sandbox = SandboxId::parse(&warm_id)
        .with_context(|| format!("the server answered an invalid id {warm_id:?}"))?;
    // The first requests open the connection and fault in code; they are not the steady state.
    for _ in 0..20 {
        api.exec(&warm_id).await?;
        subjects.direct_exec(&warm_sandbox).await?;
        api.health().await?;
    }
    let mut warm: [Vec<Duration>; 3] = Default::default();
    let bar = progress(warm_iterations, "warm exec: http, direct, /health");
    for iteration in 0..warm_iterations {
        for step in 0..3 {
            let which = (iteration + step) % 3;
            subjects.quiesce().await?;
            let started = Instant::now();
            match which {
                0 => api.exec(&warm_id).await?,
                1 => subjects.direct_exec(&warm_sandbox).await?,
                _ => api.health().await?,
            }
            warm[which].push(started.elapsed());
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    api.destroy(&warm_id).await?;

    // Throughput: one client per sandbox, all at once, for a fixed wall time per round;
    // rounds alternate which path goes first.
    let mut ids = Vec::with_capacity(clients);
    let bar = progress(clients, "throughput: spawning sandboxes");
    for _ in 0..clients {
        ids.push(api.spawn().await?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut http = Throughput::default();
    let mut direct = Throughput::default();
    let bar = progress(rounds * 2, "throughput: http, direct rounds");
    for round in 0..rounds {
        for step in 0..2 {
            subjects.quiesce().await?;
            if (round + step) % 2 == 0 {
                http.add(throughput_round(subjects, &ids, true, args.duration).await?);
            } else {
                direct.add(throughput_round(subjects, &ids, false, args.duration).await?);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    for id in &ids {
        api.destroy(id).await?;
    }
    subjects.quiesce().await?;

    let [cold_http, cold_direct] = cold;
    let [warm_http, warm_direct, health] = warm;
    Ok(Report {
        iterations,
        warm_iterations,
        clients,
        rounds,
        round: args.duration,
        cold_http: summarise(cold_http),
        cold_direct: summarise(cold_direct),
        warm_http: summarise(warm_http),
        warm_direct: summarise(warm_direct),
        health: summarise(health),
        http,
        direct,
    })
}

/// Execs completed across rounds, and how long the rounds took.
#[derive(Debug, Default)]
struct Throughput {
    execs: usize,
    elapsed: Duration,
    /// The part of `elapsed` spent after the last answer, writing the server's exec log
    /// and events (none for direct calls).
    drain: Duration,
    latencies: Vec<Duration>,
}

impl Throughput {
    fn add(&mut self, round: Self) {
        self.execs += round.execs;
        self.elapsed += round.elapsed;
        self.drain += round.drain;
        self.latencies.extend(round.latencies);
    }

    fn per_second(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a count of execs")]
        let execs = self.execs as f64;
        execs / self.elapsed.as_secs_f64()
    }
}

/// One client per sandbox runs `/bin/true` back to back until `duration` has passed. A
/// round over HTTP ends when the server has also written what the execs queued (exec log,
/// events), so a writer that falls behind counts against the HTTP figure.
async fn throughput_round(
    subjects: &Subjects,
    ids: &[String],
    over_http: bool,
    duration: Duration,
) -> anyhow::Result<Throughput> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = JoinSet::new();
    for id in ids {
        let id = id.clone();
        let api = subjects.api.clone();
        let backend = subjects.backend.clone();
        let exec = subjects.exec.clone();
        tasks.spawn(async move {
            let sandbox = SandboxId::parse(&id)
                .with_context(|| format!("the server answered an invalid id {id:?}"))?;
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let sent = Instant::now();
                if over_http {
                    api.exec(&id).await?;
                } else {
                    let result = backend.exec(&sandbox, exec.clone()).await?;
                    anyhow::ensure!(
                        result.success(),
                        "/bin/true failed in sandbox {id}: {result:?}"
                    );
                }
                latencies.push(sent.elapsed());
            }
            anyhow::Ok(latencies)
        });
    }
    let mut latencies = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        latencies.extend(joined.context("a benchmark client panicked")??);
    }
    let answered = started.elapsed();
    subjects.state.flush().await;
    let elapsed = started.elapsed();
    Ok(Throughput {
        execs: latencies.len(),
        elapsed,
        drain: elapsed.saturating_sub(answered),
        latencies,
    })
}

fn print(report: &Report, as_json: bool) -> anyhow::Result<()> {
    let added = report.warm_http.p50 - report.warm_direct.p50;
    let http_rate = report.http.per_second();
    let direct_rate = report.direct.per_second();
    let http_load = summarise(report.http.latencies.clone());
    let direct_load = summarise(report.direct.latencies.clone());
    if as_json {
        let ms = |s: Summary| json!({"p50": s.p50, "p99": s.p99});
        let value = json!({
            "iterations": report.iterations,
            "warm_iterations": report.warm_iterations,
            "spawn_exec_destroy_ms": {
                "http": ms(report.cold_http),
                "direct": ms(report.cold_direct),
                "added_p50": report.cold_http.p50 - report.cold_direct.p50,
                "ratio_p50": report.cold_http.p50 / report.cold_direct.p50,
            },
            "warm_exec_ms": {
                "http": ms(report.warm_http),
                "direct": ms(report.warm_direct),
                "health": ms(report.health),
                "added_p50": added,
                "target_added_p50": ADDED_P50_TARGET_MS,
            },
            "throughput": {
                "clients": report.clients,
                "rounds": report.rounds,
                "round_seconds": report.round.as_secs_f64(),
                "http": {
                    "execs": report.http.execs,
                    "execs_per_second": http_rate,
                    "drain_seconds": report.http.drain.as_secs_f64(),
                    "latency_ms": ms(http_load),
                },
                "direct": {
                    "execs": report.direct.execs,
                    "execs_per_second": direct_rate,
                    "latency_ms": ms(direct_load),
                },
                "ratio": http_rate / direct_rate,
                "target_execs_per_second": THROUGHPUT_TARGET,
            },
        });
        output::line(&serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let uname = rustix::system::uname();
    output::line(&format!(
        "forge bench server: {} + {} iterations, {} clients × {} rounds of {:.1} s, Linux {}, {} CPUs",
        report.iterations,
        report.warm_iterations,
        report.clients,
        report.rounds,
        report.round.as_secs_f64(),
        uname.release().to_string_lossy(),
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    ));
    output::line(&format!(
        "{:<40} {:>9} {:>9}   {}",
        "measurement", "p50", "p99", "against direct"
    ));
    let row = |name: &str, s: Summary, note: &str| {
        output::line(&format!(
            "{name:<40} {:>6.2} ms {:>6.2} ms   {note}",
            s.p50, s.p99
        ));
    };
    let verdict = |met: bool| if met { "meets" } else { "misses" };
    row(
        "direct: create + exec + destroy",
        report.cold_direct,
        "baseline",
    );
    row(
        "http: spawn + exec + destroy",
        report.cold_http,
        &format!(
            "+{:.2} ms ({:.2}×)",
            report.cold_http.p50 - report.cold_direct.p50,
            report.cold_http.p50 / report.cold_direct.p50
        ),
    );
    row("direct: warm exec", report.warm_direct, "baseline");
    row(
        "http: warm exec",
        report.warm_http,
        &format!(
            "+{added:.3} ms at p50 ({} target ≤ +{ADDED_P50_TARGET_MS} ms)",
            verdict(added <= ADDED_P50_TARGET_MS)
        ),
    );
    row(
        "http: GET /health (HTTP alone)",
        report.health,
        "no sandbox work",
    );
    output::line(&format!(
        "throughput, {} clients each with its own sandbox, {} rounds of {:.1} s:",
        report.clients,
        report.rounds,
        report.round.as_secs_f64()
    ));
    row(
        &format!("direct: {direct_rate:.0} execs/s"),
        direct_load,
        "baseline (latency under load)",
    );
    row(
        &format!("http: {http_rate:.0} execs/s"),
        http_load,
        &format!(
            "{:.2}× direct, writer drain {:.0} ms ({} target ≥ {THROUGHPUT_TARGET:.0}/s)",
            http_rate / direct_rate,
            report.http.drain.as_secs_f64() * 1000.0,
            verdict(http_rate >= THROUGHPUT_TARGET)
        ),
    );
    Ok(())
}
