//! Counters for `/metrics` (Prometheus text) and ForgeVM's JSON metrics.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in seconds, of the exec duration histogram.
const EXEC_BUCKETS: [f64; 10] = [0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

#[derive(Debug, Default)]
pub struct Metrics {
    pub sandboxes_created: AtomicU64,
    pub sandboxes_destroyed: AtomicU64,
    pub sandboxes_expired: AtomicU64,
    pub spawn_rejected: AtomicU64,
    pub execs: AtomicU64,
    pub exec_timeouts: AtomicU64,
    pub exec_ooms: AtomicU64,
    exec_buckets: [AtomicU64; EXEC_BUCKETS.len()],
    exec_seconds_micros: AtomicU64,
    pub http_2xx: AtomicU64,
    pub http_4xx: AtomicU64,
    pub http_5xx: AtomicU64,
}

impl Metrics {
    pub fn record_exec(&self, duration: Duration, timed_out: bool, oom: bool) {
        self.execs.fetch_add(1, Ordering::Relaxed);
        if timed_out {
            self.exec_timeouts.fetch_add(1, Ordering::Relaxed);
        }
        if oom {
            self.exec_ooms.fetch_add(1, Ordering::Relaxed);
        }
        let seconds = duration.as_secs_f64();
        for (bound, bucket) in EXEC_BUCKETS.iter().zip(&self.exec_buckets) {
            if seconds <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.exec_seconds_micros.fetch_add(
            u64::try_from(duration.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    pub fn record_status(&self, status: u16) {
        let counter = match status {
            200..=399 => &self.http_2xx,
            400..=499 => &self.http_4xx,
            _ => &self.http_5xx,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every counter, plus the gauges passed in.
    pub fn prometheus(&self, active: u64, warm: &[(String, u64)], uptime: Duration) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        };
        counter(
            "forge_sandboxes_created_total",
            "Sandboxes created.",
            get(&self.sandboxes_created),
        );
        counter(
            "forge_sandboxes_destroyed_total",
            "Sandboxes destroyed (including expired).",
            get(&self.sandboxes_destroyed),
        );
        counter(
            "forge_sandboxes_expired_total",
            "Sandboxes destroyed by the TTL reaper.",
            get(&self.sandboxes_expired),
        );
        counter(
            "forge_spawns_rejected_total",
            "Spawns refused because the pool was full.",
            get(&self.spawn_rejected),
        );
        counter(
            "forge_exec_timeouts_total",
            "Commands killed at their timeout.",
            get(&self.exec_timeouts),
        );
        counter(
            "forge_exec_oom_kills_total",
            "Commands killed by the OOM killer.",
            get(&self.exec_ooms),
        );
        let _ = writeln!(
            out,
            "# HELP forge_http_responses_total HTTP responses by status class."
        );
        let _ = writeln!(out, "# TYPE forge_http_responses_total counter");
        for (class, value) in [
            ("2xx", get(&self.http_2xx)),
            ("4xx", get(&self.http_4xx)),
            ("5xx", get(&self.http_5xx)),
        ] {
            let _ = writeln!(
                out,
                "forge_http_responses_total{{class=\"{class}\"}} {value}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP forge_exec_duration_seconds Duration of commands run to completion."
        );
        let _ = writeln!(out, "# TYPE forge_exec_duration_seconds histogram");
        for (bound, bucket) in EXEC_BUCKETS.iter().zip(&self.exec_buckets) {
            let _ = writeln!(
                out,
                "forge_exec_duration_seconds_bucket{{le=\"{bound}\"}} {}",
                get(bucket)
            );
        }
        let count = get(&self.execs);
        let _ = writeln!(
            out,
            "forge_exec_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        #[expect(
            clippy::cast_precision_loss,
            reason = "a sum of microseconds shown as seconds"
        )]
        let sum = get(&self.exec_seconds_micros) as f64 / 1e6;
        let _ = writeln!(
            out,
            "forge_exec_duration_seconds_sum {sum}\nforge_exec_duration_seconds_count {count}"
        );
        let _ = writeln!(
            out,
            "# HELP forge_sandboxes_active Sandboxes alive now.\n# TYPE forge_sandboxes_active gauge\nforge_sandboxes_active {active}"
        );
        let _ = writeln!(
            out,
            "# HELP forge_pool_ready Warm sandboxes ready per template.\n# TYPE forge_pool_ready gauge"
        );
        for (template, ready) in warm {
            let _ = writeln!(
                out,
                "forge_pool_ready{{template=\"{}\"}} {ready}",
                template.replace(['"', '\\', '\n'], "_")
            );
        }
        let _ = writeln!(
            out,
            "# HELP forge_uptime_seconds Seconds since the server started.\n# TYPE forge_uptime_seconds gauge\nforge_uptime_seconds {}",
            uptime.as_secs()
        );
        out
    }
}
