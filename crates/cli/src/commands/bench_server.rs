//! `forge bench server`: what the HTTP API costs on top of the sandbox backend. The real
//! app (router, middleware, store, event writer) serves on a loopback socket inside this
//! process, a keep-alive HTTP client drives it the way an SDK would, and every HTTP figure
//! is measured in the same run, interleaved, as the same `JailBackend` called directly,
//! since timings on shared machines only compare within one run.
//!
//! Client, server and sandboxes share this machine's cores, so the HTTP figures include the
//! client's own work (building the request, parsing the answer), as an SDK user sees it. To
//! tell the two apart, the warm requests are also written by hand on a plain socket: that
//! path costs the server and the loopback only.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use forge_sandbox::{Backend, JailBackend, JailConfig};
use forge_server::{AppState, ServerConfig};
use forge_types::{ExecRequest, SandboxId, SandboxSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::bench::{Summary, progress, summarise};
use crate::cli::BenchServerArgs;
use crate::output;

/// Latency the HTTP API may add to a warm exec at p50, in milliseconds.
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

/// HTTP/1.1 written by hand on one kept-alive socket: no client library, so what it
/// measures is the server, the kernel's loopback and the wake-ups between them.
struct RawHttp {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl RawHttp {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to {addr}"))?;
        // Each request is one write; without this, Nagle could hold the next one back.
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buffer: Vec::with_capacity(4096),
        })
    }

    fn get(addr: SocketAddr, path: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").into_bytes()
    }

    fn post(addr: SocketAddr, path: &str, body: &Value) -> Vec<u8> {
        let body = body.to_string();
        format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// Sends a request and reads its whole answer; returns the body of a 200.
    async fn round_trip(&mut self, request: &[u8]) -> anyhow::Result<&[u8]> {
        self.stream.write_all(request).await?;
        self.buffer.clear();
        let mut chunk = [0_u8; 4096];
        loop {
            let read = self.stream.read(&mut chunk).await?;
            anyhow::ensure!(read > 0, "the server closed the connection");
            self.buffer.extend_from_slice(&chunk[..read]);
            let Some(end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&self.buffer[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            if self.buffer.len() < end + 4 + length {
                continue;
            }
            anyhow::ensure!(
                head.starts_with("http/1.1 200"),
                "the server answered {}",
                head.lines().next().unwrap_or("")
            );
            return Ok(&self.buffer[end + 4..end + 4 + length]);
        }
    }
}

/// The backend and the same backend behind the HTTP API, side by side.
struct Subjects {
    backend: JailBackend,
    state: AppState,
    addr: SocketAddr,
    api: Api,
    /// What the exec handler hands the backend for `{"command":"/bin/true"}`.
    exec: ExecRequest,
}

impl Subjects {
    async fn direct_exec(&self, id: &SandboxId, request: ExecRequest) -> anyhow::Result<()> {
        let result = self.backend.exec(id, request).await?;
        anyhow::ensure!(
            result.success(),
            "/bin/true failed in sandbox {id}: {result:?}"
        );
        Ok(())
    }

    /// Waits until the machine is idle again: the server's exec log and events written, what
    /// destroyed sandboxes left removed by the janitor, and the helper's stock made.
    async fn quiesce(&self) -> anyhow::Result<()> {
        self.state.flush().await;
        self.backend.quiesce().await?;
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
        addr,
        api: Api::new(addr)?,
        exec,
    };

    let outcome = measure(&subjects, &args).await;

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

/// Spawn + exec + destroy, whole and step by step.
#[derive(Debug, Default)]
struct Cold {
    total: Vec<Duration>,
    create: Vec<Duration>,
    exec: Vec<Duration>,
    destroy: Vec<Duration>,
}

impl Cold {
    fn push(&mut self, started: Instant, created: Instant, executed: Instant) {
        let done = Instant::now();
        self.total.push(done.duration_since(started));
        self.create.push(created.duration_since(started));
        self.exec.push(executed.duration_since(created));
        self.destroy.push(done.duration_since(executed));
    }
}

/// The warm measurements, in the order they rotate through.
const WARM: [&str; 6] = [
    "http: warm exec",
    "http, raw socket: warm exec",
    "direct: warm exec",
    "direct: warm exec, argv (no shell)",
    "http: GET /health",
    "http, raw socket: GET /health",
];

/// Everything measured.
#[derive(Debug)]
struct Report {
    iterations: usize,
    warm_iterations: usize,
    clients: usize,
    rounds: usize,
    round: Duration,
    cold_http: Cold,
    cold_direct: Cold,
    warm: [Summary; 6],
    http: Throughput,
    direct: Throughput,
}

async fn measure(subjects: &Subjects, args: &BenchServerArgs) -> anyhow::Result<Report> {
    let iterations = args.iterations.max(10);
    let warm_iterations = iterations * 5;
    let clients = args.clients.max(1);
    let rounds = args.rounds.max(1);
    let api = &subjects.api;

    // Spawn + exec + destroy, HTTP and direct in alternating order, each from an idle machine.
    let mut cold_http = Cold::default();
    let mut cold_direct = Cold::default();
    let bar = progress(iterations, "spawn + exec + destroy: http, direct");
    for iteration in 0..iterations {
        for step in 0..2 {
            subjects.quiesce().await?;
            let started = Instant::now();
            if (iteration + step) % 2 == 0 {
                let id = api.spawn().await?;
                let created = Instant::now();
                api.exec(&id).await?;
                let executed = Instant::now();
                api.destroy(&id).await?;
                cold_http.push(started, created, executed);
            } else {
                let info = subjects.backend.create(SandboxSpec::default()).await?;
                let created = Instant::now();
                subjects
                    .direct_exec(&info.id, subjects.exec.clone())
                    .await?;
                let executed = Instant::now();
                subjects.backend.destroy(&info.id).await?;
                cold_direct.push(started, created, executed);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    subjects.quiesce().await?;

    // Warm exec in one sandbox, shared by every path; `/health` is HTTP with no sandbox work.
    let warm_id = api.spawn().await?;
    let warm_sandbox = SandboxId::parse(&warm_id)
        .with_context(|| format!("the server answered an invalid id {warm_id:?}"))?;
    let no_shell = ExecRequest::argv(["/bin/true"]);
    let mut raw = RawHttp::connect(subjects.addr).await?;
    let raw_exec = RawHttp::post(
        subjects.addr,
        &format!("/api/v1/sandboxes/{warm_id}/exec"),
        &json!({"command": "/bin/true"}),
    );
    let raw_health = RawHttp::get(subjects.addr, "/api/v1/health");
    let mut warm: [Vec<Duration>; WARM.len()] = Default::default();
    let bar = progress(warm_iterations, "warm exec and /health: http, raw, direct");
    // The first round trips open connections and fault in code: not the steady state.
    for iteration in 0..warm_iterations + 20 {
        for step in 0..WARM.len() {
            let which = (iteration + step) % WARM.len();
            subjects.quiesce().await?;
            let started = Instant::now();
            match which {
                0 => api.exec(&warm_id).await?,
                1 => {
                    let body = raw.round_trip(&raw_exec).await?;
                    let result: Value = serde_json::from_slice(body)?;
                    anyhow::ensure!(
                        result["exit_code"] == 0,
                        "/bin/true failed over a raw socket: {result}"
                    );
                }
                2 => {
                    subjects
                        .direct_exec(&warm_sandbox, subjects.exec.clone())
                        .await?;
                }
                3 => {
                    subjects
                        .direct_exec(&warm_sandbox, no_shell.clone())
                        .await?;
                }
                4 => api.health().await?,
                _ => {
                    raw.round_trip(&raw_health).await?;
                }
            }
            if iteration >= 20 {
                warm[which].push(started.elapsed());
            }
        }
        if iteration >= 20 {
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    drop(raw);
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

    Ok(Report {
        iterations,
        warm_iterations,
        clients,
        rounds,
        round: args.duration,
        cold_http,
        cold_direct,
        warm: warm.map(summarise),
        http,
        direct,
    })
}

/// CPU time spent so far by this process (client, server, store, benchmark) and by every
/// sandbox (their cgroups: inits and commands), and by nothing else on the machine, so that
/// a neighbour's build does not count.
fn cpu_used(cgroup_parents: &[PathBuf]) -> Duration {
    own_cpu() + sandboxes_cpu(cgroup_parents)
}

/// This process's user and system time, all threads.
fn own_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name may hold spaces; the fields after it are fixed: utime and stime are
    // the 12th and 13th after the closing parenthesis.
    let ticks: u64 = stat.rsplit_once(") ").map_or(0, |(_, rest)| {
        rest.split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|f| f.parse::<u64>().ok())
            .sum()
    });
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / hz)
}

/// CPU time charged to the cgroups sandboxes live under (v1 `cpuacct`, or v2 `cpu.stat`).
fn sandboxes_cpu(cgroup_parents: &[PathBuf]) -> Duration {
    cgroup_parents
        .iter()
        .filter_map(|dir| {
            if let Ok(text) = std::fs::read_to_string(dir.join("cpuacct.usage")) {
                return text.trim().parse().ok().map(Duration::from_nanos);
            }
            std::fs::read_to_string(dir.join("cpu.stat"))
                .ok()?
                .lines()
                .find_map(|line| line.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse().ok())
                .map(Duration::from_micros)
        })
        .max()
        .unwrap_or_default()
}

/// Execs completed across rounds, and what the rounds took.
#[derive(Debug, Default)]
struct Throughput {
    execs: usize,
    elapsed: Duration,
    /// The part of `elapsed` spent after the last answer, writing the server's exec log
    /// and events (none for direct calls).
    drain: Duration,
    /// CPU time this process and the sandboxes spent during the rounds.
    cpu: Duration,
    latencies: Vec<Duration>,
}

impl Throughput {
    fn add(&mut self, round: Self) {
        self.execs += round.execs;
        self.elapsed += round.elapsed;
        self.drain += round.drain;
        self.cpu += round.cpu;
        self.latencies.extend(round.latencies);
    }

    fn per_second(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a count of execs")]
        let execs = self.execs as f64;
        execs / self.elapsed.as_secs_f64()
    }

    /// CPU time per exec, in milliseconds: unlike execs per second, this hardly moves when a
    /// neighbour on the machine takes a core away.
    fn cpu_per_exec_ms(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a count of execs")]
        let execs = self.execs.max(1) as f64;
        self.cpu.as_secs_f64() * 1000.0 / execs
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
    let cgroups = subjects.backend.cgroup_parents();
    let cpu = cpu_used(&cgroups);
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
        cpu: cpu_used(&cgroups).saturating_sub(cpu),
        latencies,
    })
}

fn print(report: &Report, as_json: bool) -> anyhow::Result<()> {
    let [
        http_exec,
        raw_exec,
        direct_exec,
        argv_exec,
        http_health,
        raw_health,
    ] = report.warm;
    let added = http_exec.p50 - direct_exec.p50;
    let added_raw = raw_exec.p50 - direct_exec.p50;
    let p50 = |samples: &[Duration]| summarise(samples.to_vec()).p50;
    let cold_http = summarise(report.cold_http.total.clone());
    let cold_direct = summarise(report.cold_direct.total.clone());
    let http_rate = report.http.per_second();
    let direct_rate = report.direct.per_second();
    let http_load = summarise(report.http.latencies.clone());
    let direct_load = summarise(report.direct.latencies.clone());
    if as_json {
        let ms = |s: Summary| json!({"p50": s.p50, "p99": s.p99});
        let steps = |c: &Cold| {
            json!({
                "total": ms(summarise(c.total.clone())),
                "create_p50": p50(&c.create),
                "exec_p50": p50(&c.exec),
                "destroy_p50": p50(&c.destroy),
            })
        };
        let value = json!({
            "iterations": report.iterations,
            "warm_iterations": report.warm_iterations,
            "spawn_exec_destroy_ms": {
                "http": steps(&report.cold_http),
                "direct": steps(&report.cold_direct),
                "added_p50": cold_http.p50 - cold_direct.p50,
                "ratio_p50": cold_http.p50 / cold_direct.p50,
            },
            "warm_exec_ms": {
                "http": ms(http_exec),
                "http_raw_socket": ms(raw_exec),
                "direct": ms(direct_exec),
                "direct_argv": ms(argv_exec),
                "health": ms(http_health),
                "health_raw_socket": ms(raw_health),
                "added_p50": added,
                "added_p50_raw_socket": added_raw,
                "target_added_p50": ADDED_P50_TARGET_MS,
            },
            "throughput": {
                "clients": report.clients,
                "rounds": report.rounds,
                "round_seconds": report.round.as_secs_f64(),
                "http": {
                    "execs": report.http.execs,
                    "execs_per_second": http_rate,
                    "cpu_ms_per_exec": report.http.cpu_per_exec_ms(),
                    "drain_seconds": report.http.drain.as_secs_f64(),
                    "latency_ms": ms(http_load),
                },
                "direct": {
                    "execs": report.direct.execs,
                    "execs_per_second": direct_rate,
                    "cpu_ms_per_exec": report.direct.cpu_per_exec_ms(),
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
    let steps = |c: &Cold| {
        format!(
            "create {:.2}, exec {:.2}, destroy {:.2}",
            p50(&c.create),
            p50(&c.exec),
            p50(&c.destroy)
        )
    };
    row(
        "direct: create + exec + destroy",
        cold_direct,
        &format!("baseline: {}", steps(&report.cold_direct)),
    );
    row(
        "http: spawn + exec + destroy",
        cold_http,
        &format!(
            "{:+.2} ms ({:.2}×): {}",
            cold_http.p50 - cold_direct.p50,
            cold_http.p50 / cold_direct.p50,
            steps(&report.cold_http)
        ),
    );
    row(WARM[2], direct_exec, "baseline (/bin/sh -c /bin/true)");
    row(
        WARM[3],
        argv_exec,
        &format!(
            "{:+.3} ms: the wire's /bin/sh -c",
            argv_exec.p50 - direct_exec.p50
        ),
    );
    row(
        WARM[0],
        http_exec,
        &format!(
            "{added:+.3} ms at p50 ({} target ≤ +{ADDED_P50_TARGET_MS} ms)",
            verdict(added <= ADDED_P50_TARGET_MS)
        ),
    );
    row(
        WARM[1],
        raw_exec,
        &format!("{added_raw:+.3} ms at p50: the server's share, no client library"),
    );
    row(WARM[4], http_health, "no sandbox work");
    row(WARM[5], raw_health, "no sandbox work, no client library");
    output::line(&format!(
        "throughput, {} clients each with its own sandbox, {} rounds of {:.1} s per path:",
        report.clients,
        report.rounds,
        report.round.as_secs_f64()
    ));
    row(
        &format!("direct: {direct_rate:.0} execs/s"),
        direct_load,
        &format!(
            "baseline, {:.2} ms CPU per exec (latency under load)",
            report.direct.cpu_per_exec_ms()
        ),
    );
    row(
        &format!("http: {http_rate:.0} execs/s"),
        http_load,
        &format!(
            "{:.2}× direct, {:.2} ms CPU per exec ({} target ≥ {THROUGHPUT_TARGET:.0}/s)",
            http_rate / direct_rate,
            report.http.cpu_per_exec_ms(),
            verdict(http_rate >= THROUGHPUT_TARGET)
        ),
    );
    Ok(())
}
