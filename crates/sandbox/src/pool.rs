//! Warm pools: sandboxes created ahead of demand for one spec, so that acquiring one is a
//! hand-off instead of a start. A background task keeps the pool at its size; a released
//! sandbox is destroyed (never reused: its state is the last user's) in the background.
//!
//! Refilling waits a moment after each acquisition: whoever acquired a sandbox is about to
//! use it, and a sandbox start beside its first commands would slow them down.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use forge_types::{ExecRequest, SandboxId, SandboxInfo, SandboxSpec};
use tokio::sync::Notify;

use crate::backend::{Backend, SandboxError};

/// How long refilling waits after an acquisition.
const REFILL_DELAY: Duration = Duration::from_millis(10);

/// Counters of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PoolStatus {
    /// Sandboxes waiting to be acquired.
    pub ready: usize,
    /// The number the pool refills to.
    pub size: usize,
    /// Acquisitions served from the pool.
    pub hits: u64,
    /// Acquisitions that had to create a sandbox on the spot.
    pub misses: u64,
}

#[derive(Debug)]
struct Inner {
    backend: Arc<dyn Backend>,
    spec: SandboxSpec,
    /// Commands run in each new sandbox before it is ready (a template's setup).
    setup: Vec<ExecRequest>,
    size: usize,
    last_acquired: Mutex<Option<Instant>>,
    last_error: Mutex<Option<String>>,
    ready: Mutex<VecDeque<SandboxInfo>>,
    wake: Notify,
    closed: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// A warm pool for one spec. Dropping it stops refilling; call [`Pool::shutdown`] to also
/// destroy the sandboxes it holds.
#[derive(Debug)]
pub struct Pool {
    inner: Arc<Inner>,
    refill: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Pool {
    /// Starts a pool that keeps `size` sandboxes of `spec` ready. Must be called within a
    /// tokio runtime.
    pub fn new(backend: Arc<dyn Backend>, spec: SandboxSpec, size: usize) -> Self {
        Self::with_setup(backend, spec, Vec::new(), size)
    }

    /// Like [`Pool::new`], running `setup` in each sandbox (in order, each to success)
    /// before it is ready, so that acquiring one hands out a prepared sandbox.
    pub fn with_setup(
        backend: Arc<dyn Backend>,
        spec: SandboxSpec,
        setup: Vec<ExecRequest>,
        size: usize,
    ) -> Self {
        let inner = Arc::new(Inner {
            backend,
            spec,
            setup,
            size,
            last_acquired: Mutex::new(None),
            last_error: Mutex::new(None),
            ready: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        });
        let refill = Mutex::new(Some(tokio::spawn(refill(inner.clone()))));
        Self { inner, refill }
    }

    pub fn spec(&self) -> &SandboxSpec {
        &self.inner.spec
    }

    /// A ready sandbox, or a new one (set up) when the pool is empty.
    pub async fn acquire(&self) -> Result<SandboxInfo, SandboxError> {
        let ready = self.inner.ready.lock().ok().and_then(|mut r| r.pop_front());
        if let Ok(mut last) = self.inner.last_acquired.lock() {
            *last = Some(Instant::now());
        }
        self.inner.wake.notify_one();
        if let Some(info) = ready {
            self.inner.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(info);
        }
        self.inner.misses.fetch_add(1, Ordering::Relaxed);
        self.inner.make().await.map_err(|(err, _)| err)
    }

    /// Why the last attempt to make a sandbox failed, if it did.
    pub fn last_error(&self) -> Option<String> {
        self.inner.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// Hands a sandbox back: it is destroyed in the background.
    pub fn release(&self, id: SandboxId) {
        let backend = self.inner.backend.clone();
        tokio::spawn(async move {
            if let Err(err) = backend.destroy(&id).await {
                tracing::warn!(sandbox = %id, error = %err, "destroying a released pool sandbox failed");
            }
        });
    }

    /// Waits until the pool holds its full size (or `limit` passes); true if it does.
    pub async fn wait_full(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if self.status().ready >= self.inner.size {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    pub fn status(&self) -> PoolStatus {
        PoolStatus {
            ready: self.inner.ready.lock().map_or(0, |r| r.len()),
            size: self.inner.size,
            hits: self.inner.hits.load(Ordering::Relaxed),
            misses: self.inner.misses.load(Ordering::Relaxed),
        }
    }

    /// Stops refilling and destroys every sandbox the pool holds, including one that was
    /// being made.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
        let refill = self.refill.lock().ok().and_then(|mut r| r.take());
        if let Some(refill) = refill {
            // A sandbox in the making is destroyed by the task itself once it sees the pool
            // closed.
            let _ = refill.await;
        }
        let drained: Vec<SandboxInfo> = self
            .inner
            .ready
            .lock()
            .map(|mut r| r.drain(..).collect())
            .unwrap_or_default();
        for info in drained {
            let _ = self.inner.backend.destroy(&info.id).await;
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
    }
}

impl Inner {
    /// Creates a sandbox and runs the setup in it; on failure nothing is left behind and the
    /// error comes with a message for the pool's status.
    async fn make(&self) -> Result<SandboxInfo, (SandboxError, String)> {
        let info = self.backend.create(self.spec.clone()).await.map_err(|e| {
            let message = e.to_string();
            (e, message)
        })?;
        for command in &self.setup {
            let reason = match self.backend.exec(&info.id, command.clone()).await {
                Ok(result) if result.success() => continue,
                Ok(result) => format!(
                    "exit code {}: {}",
                    result.exit_code,
                    String::from_utf8_lossy(&result.stderr).trim()
                ),
                Err(err) => err.to_string(),
            };
            let _ = self.backend.destroy(&info.id).await;
            let err = SandboxError::SetupCommand {
                command: command.command.display(),
                reason,
            };
            let message = err.to_string();
            return Err((err, message));
        }
        Ok(info)
    }
}

async fn refill(inner: Arc<Inner>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let missing = inner
            .size
            .saturating_sub(inner.ready.lock().map_or(0, |r| r.len()));
        if missing == 0 {
            inner.wake.notified().await;
            continue;
        }
        let quiet_from = inner
            .last_acquired
            .lock()
            .ok()
            .and_then(|last| *last)
            .map(|at| at + REFILL_DELAY);
        if let Some(quiet_from) = quiet_from
            && quiet_from > Instant::now()
        {
            tokio::time::sleep_until(quiet_from).await;
            continue;
        }
        match inner.make().await {
            Ok(info) => {
                backoff = Duration::from_millis(100);
                if let Ok(mut last) = inner.last_error.lock() {
                    *last = None;
                }
                if inner.closed.load(Ordering::SeqCst) {
                    let _ = inner.backend.destroy(&info.id).await;
                    return;
                }
                if let Ok(mut ready) = inner.ready.lock() {
                    ready.push_back(info);
                }
            }
            Err((err, message)) => {
                tracing::warn!(error = %err, "warm pool could not make a sandbox; retrying");
                if let Ok(mut last) = inner.last_error.lock() {
                    *last = Some(message);
                }
                // Woken early by a shutdown.
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = inner.wake.notified() => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}
