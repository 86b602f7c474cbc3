//! The gateway: sessions, the tool registry, and the one path every call takes
//! (validate → decide → run → record).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use forge_policy::{Ceilings, Policy, SessionUsage};
use forge_sandbox::Backend;
use forge_store::{LedgerRecord, Store};
use forge_types::{SessionId, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::GatewayError;
use crate::ledger::{LedgerEntry, LedgerFile};
use crate::redact::{REDACTED, redact_value, summarize};
use crate::reply::{Outcome, ToolError, ToolReply};
use crate::session::{Live, SessionInfo, SessionRequest, sandbox_spec};
use crate::tools::{self, Cx, Entry, Typed};

/// How the operator set the gateway up.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The data directory: the ledger file (`ledger.jsonl`) and artifacts live here, out of
    /// every sandbox's reach.
    pub data_dir: PathBuf,
    /// The most any session may get.
    pub ceilings: Ceilings,
    /// The image of the sandboxes sessions create.
    pub image: String,
}

impl GatewayConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            ceilings: Ceilings::default(),
            image: forge_types::sandbox::HOST_IMAGE.to_owned(),
        }
    }

    /// Where the JSONL ledger of a data directory is.
    pub fn ledger_path(data_dir: &std::path::Path) -> PathBuf {
        data_dir.join("ledger.jsonl")
    }
}

/// A file a session exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Path relative to the session's artifacts.
    pub path: String,
    pub bytes: u64,
}

/// The tool gateway. Cheap to clone: clones share everything.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    backend: Arc<dyn Backend>,
    store: Store,
    config: GatewayConfig,
    ledger: LedgerFile,
    sessions: RwLock<HashMap<SessionId, Arc<Live>>>,
    tools: Vec<Entry>,
    index: HashMap<&'static str, usize>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn random_session_id() -> SessionId {
    let mut bytes = [0u8; 6];
    let _ = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty());
    SessionId::from_random(bytes)
}

impl Gateway {
    /// A gateway over `backend` and `store`. Sessions left open by an earlier process (or
    /// another one sharing the data directory) are served on first use.
    pub fn new(backend: Arc<dyn Backend>, store: Store, config: GatewayConfig) -> Self {
        let tools = tools::entries();
        let index = tools
            .iter()
            .enumerate()
            .filter_map(|(at, entry)| {
                forge_policy::catalog::TOOLS
                    .iter()
                    .find(|name| **name == entry.spec.name)
                    .map(|name| (*name, at))
            })
            .collect();
        let ledger = LedgerFile::new(GatewayConfig::ledger_path(&config.data_dir));
        Self {
            inner: Arc::new(Inner {
                backend,
                store,
                config,
                ledger,
                sessions: RwLock::new(HashMap::new()),
                tools,
                index,
            }),
        }
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.inner.config
    }

    /// The JSONL ledger's path.
    pub fn ledger_path(&self) -> &std::path::Path {
        self.inner.ledger.path()
    }

    /// Opens a session: the requested policy (or the default) narrowed by the ceilings, and
    /// a new sandbox built from it — or the existing sandbox the request names.
    pub async fn create_session(
        &self,
        request: SessionRequest,
    ) -> Result<SessionInfo, GatewayError> {
        let requested = request.policy.unwrap_or_default();
        requested.validate().map_err(GatewayError::Policy)?;
        let policy = requested.within(&self.inner.config.ceilings);
        let id = random_session_id();
        let backend = &self.inner.backend;
        let sandbox_error = |source| GatewayError::Sandbox {
            session: id.to_string(),
            source,
        };
        let (sandbox_id, owns_sandbox) = if let Some(existing) = request.sandbox_id {
            backend.get(&existing).await.map_err(sandbox_error)?;
            (existing, false)
        } else {
            let spec = sandbox_spec(&policy, &self.inner.config.image, &id);
            let info = backend.create(spec).await.map_err(sandbox_error)?;
            (info.id, true)
        };
        let created_at_ms = now_ms();
        let ttl_ms =
            i64::try_from(policy.session_ttl_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
        let live = Live {
            id: id.clone(),
            sandbox_id,
            owns_sandbox,
            policy,
            created_at_ms,
            expires_at_ms: created_at_ms.saturating_add(ttl_ms),
            calls: 0.into(),
            secrets: std::sync::Mutex::new(Vec::new()),
        };
        if let Err(error) = self
            .inner
            .store
            .insert_gateway_session(&live.record())
            .await
        {
            if owns_sandbox {
                let _ = backend.destroy(&live.sandbox_id).await;
            }
            return Err(error.into());
        }
        let info = live.info();
        self.sessions_mut().insert(id, Arc::new(live));
        Ok(info)
    }

    fn sessions_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<SessionId, Arc<Live>>> {
        self.inner
            .sessions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn cached(&self, id: &SessionId) -> Option<Arc<Live>> {
        self.inner
            .sessions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// The live session `id`, loading it from the store if this process has not served it
    /// yet; closes it first if its TTL has passed.
    async fn live(&self, id: &str) -> Result<Arc<Live>, GatewayError> {
        let not_found = || GatewayError::SessionNotFound { id: id.to_owned() };
        let parsed = SessionId::parse(id).ok_or_else(not_found)?;
        let live = if let Some(live) = self.cached(&parsed) {
            live
        } else {
            let record = self
                .inner
                .store
                .gateway_session(id)
                .await?
                .ok_or_else(not_found)?;
            if let Some(reason) = record
                .close_reason
                .clone()
                .or(record.closed_at_ms.map(|_| "closed".to_owned()))
            {
                return Err(GatewayError::SessionClosed {
                    id: id.to_owned(),
                    reason,
                });
            }
            let calls = self.inner.store.ledger_count(id).await?;
            let live = Arc::new(Live::from_record(
                &record,
                u64::try_from(calls).unwrap_or(0),
            )?);
            self.sessions_mut().entry(parsed).or_insert(live).clone()
        };
        if now_ms() >= live.expires_at_ms {
            self.shut(&live, "expired: its session_ttl_seconds passed")
                .await?;
            return Err(GatewayError::SessionClosed {
                id: id.to_owned(),
                reason: "expired: its session_ttl_seconds passed".to_owned(),
            });
        }
        Ok(live)
    }

    /// A session's state.
    pub async fn session(&self, id: &str) -> Result<SessionInfo, GatewayError> {
        match self.live(id).await {
            Ok(live) => Ok(live.info()),
            Err(GatewayError::SessionClosed { .. }) => {
                let record = self
                    .inner
                    .store
                    .gateway_session(id)
                    .await?
                    .ok_or_else(|| GatewayError::SessionNotFound { id: id.to_owned() })?;
                let calls = self.inner.store.ledger_count(id).await?;
                let mut info =
                    Live::from_record(&record, u64::try_from(calls).unwrap_or(0))?.info();
                "closed".clone_into(&mut info.state);
                info.close_reason = record.close_reason;
                Ok(info)
            }
            Err(other) => Err(other),
        }
    }

    /// Every tool the gateway has, with its schema.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.inner
            .tools
            .iter()
            .map(|entry| entry.spec.clone())
            .collect()
    }

    /// The tools a session may call: those its policy offers (the shell only when it allows
    /// one). MCP's `tools/list` shows exactly these.
    pub async fn session_tools(&self, id: &str) -> Result<Vec<ToolSpec>, GatewayError> {
        let live = self.live(id).await?;
        Ok(self.offered(&live.policy))
    }

    fn offered(&self, policy: &Policy) -> Vec<ToolSpec> {
        self.inner
            .tools
            .iter()
            .filter(|entry| policy.offers(&entry.spec.name))
            .map(|entry| entry.spec.clone())
            .collect()
    }

    /// Calls `tool` in session `id`: validate, decide, run, record — in that order, every
    /// time. A repeated `idempotency_key` returns the recorded reply without running again.
    ///
    /// Only a missing session or a broken store or ledger is an `Err`; invalid, denied,
    /// pending and failed calls are replies with their [`Outcome`], recorded like the rest.
    pub async fn call(
        &self,
        id: &str,
        tool: &str,
        arguments: Value,
        idempotency_key: Option<String>,
    ) -> Result<ToolReply, GatewayError> {
        let live = self.live(id).await?;
        if let Some(key) = &idempotency_key
            && let Some(record) = self.inner.store.ledger_by_key(id, key).await?
        {
            let mut reply: ToolReply = serde_json::from_value(record.reply).map_err(|source| {
                GatewayError::Store(forge_store::StoreError::Decode {
                    what: "ledger reply",
                    source,
                })
            })?;
            reply.replayed = true;
            return Ok(reply);
        }
        let started = Instant::now();
        // Every call counts against the budget, refused ones too, so an agent stuck in a loop
        // of refused calls still runs out.
        let usage = SessionUsage {
            calls: live.calls.fetch_add(1, Ordering::SeqCst),
        };
        let entry = self
            .inner
            .index
            .get(tool)
            .and_then(|at| self.inner.tools.get(*at));
        let mut ledger_arguments = arguments.clone();
        if let Some(entry) = entry {
            hide_fields(&mut ledger_arguments, entry.secret_fields);
        }

        let mut verdict = None;
        let (outcome, result, error) = match entry.map(|entry| entry.checker.check(&arguments)) {
            None => (
                Outcome::Invalid,
                Value::Null,
                Some(ToolError {
                    field: Some("tool".to_owned()),
                    message: format!("no tool is named {tool:?}"),
                }),
            ),
            Some(Err(error)) => (Outcome::Invalid, Value::Null, Some(error)),
            Some(Ok(())) => {
                let artifacts = crate::tools::artifacts_dir(&self.inner.config.data_dir, id);
                let cx = Cx {
                    backend: self.inner.backend.as_ref(),
                    sandbox: &live.sandbox_id,
                    policy: &live.policy,
                    session: &live,
                    artifacts: &artifacts,
                };
                let mut judge = |call: &forge_policy::ToolCall| live.policy.evaluate(call, usage);
                match tools::dispatch(tool, arguments, &mut judge, &cx).await {
                    Typed::Invalid(error) => (Outcome::Invalid, Value::Null, Some(error)),
                    Typed::Stopped(stopped) => {
                        let outcome = if stopped.decision == forge_policy::Decision::Ask {
                            Outcome::Pending
                        } else {
                            Outcome::Denied
                        };
                        verdict = Some(stopped);
                        (outcome, Value::Null, None)
                    }
                    Typed::Ran(allowed, Ok(value)) => {
                        verdict = Some(allowed);
                        (Outcome::Ok, value, None)
                    }
                    Typed::Ran(allowed, Err(error)) => {
                        verdict = Some(allowed);
                        (Outcome::Failed, Value::Null, Some(error))
                    }
                }
            }
        };
        let duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);

        let secrets = live.secrets();
        let mut reply = ToolReply {
            session_id: live.id.clone(),
            tool: tool.to_owned(),
            outcome,
            decision: verdict.as_ref().map(|v| v.decision),
            rule: verdict.as_ref().map(|v| v.rule.clone()),
            reason: verdict.map(|v| v.reason),
            result,
            error,
            duration_us,
            ledger_seq: 0,
            replayed: false,
        };
        reply.result = {
            let mut value = std::mem::take(&mut reply.result);
            redact_value(&mut value, &secrets);
            value
        };
        if let Some(error) = &mut reply.error {
            error.message = crate::redact::redact_text(&error.message, &secrets);
        }
        redact_value(&mut ledger_arguments, &secrets);
        self.record(&mut reply, ledger_arguments, idempotency_key)
            .await?;
        Ok(reply)
    }

    /// Appends the call to the JSONL ledger and the store; sets the reply's `ledger_seq`.
    async fn record(
        &self,
        reply: &mut ToolReply,
        arguments: Value,
        idempotency_key: Option<String>,
    ) -> Result<(), GatewayError> {
        let summary = match (&reply.error, reply.outcome) {
            (Some(error), _) => serde_json::to_value(error).unwrap_or_default(),
            (None, Outcome::Ok) => summarize(&reply.result),
            (None, _) => Value::Null,
        };
        let mut entry = LedgerEntry {
            seq: 0,
            ts_ms: now_ms(),
            session_id: reply.session_id.to_string(),
            tool: reply.tool.clone(),
            arguments: summarize(&arguments),
            decision: reply.decision,
            rule: reply.rule.clone(),
            reason: reply.reason.clone(),
            outcome: reply.outcome,
            summary,
            duration_us: reply.duration_us,
            idempotency_key,
            prev_hash: String::new(),
            hash: String::new(),
        };
        let inner = Arc::clone(&self.inner);
        let entry =
            tokio::task::spawn_blocking(move || inner.ledger.append(&mut entry).map(|()| entry))
                .await
                .map_err(|join| GatewayError::Ledger {
                    path: self.ledger_path().to_owned(),
                    source: std::io::Error::other(join),
                })?
                .map_err(|source| GatewayError::Ledger {
                    path: self.ledger_path().to_owned(),
                    source,
                })?;
        reply.ledger_seq = entry.seq;
        let record = LedgerRecord {
            seq: i64::try_from(entry.seq).unwrap_or(i64::MAX),
            ts_ms: entry.ts_ms,
            session_id: entry.session_id,
            tool: entry.tool,
            arguments: entry.arguments,
            decision: entry.decision.map(|d| d.as_str().to_owned()),
            rule: entry.rule,
            reason: entry.reason,
            outcome: entry.outcome.as_str().to_owned(),
            summary: entry.summary,
            duration_us: i64::try_from(entry.duration_us).unwrap_or(i64::MAX),
            idempotency_key: entry.idempotency_key,
            reply: serde_json::to_value(&*reply).unwrap_or_default(),
            hash: entry.hash,
        };
        self.inner.store.insert_ledger(&record).await?;
        Ok(())
    }

    /// Resets a session: `session_reset` through the usual path (so it is judged and
    /// recorded).
    pub async fn reset(&self, id: &str) -> Result<ToolReply, GatewayError> {
        self.call(
            id,
            "session_reset",
            Value::Object(serde_json::Map::new()),
            None,
        )
        .await
    }

    /// Closes a session, destroying its sandbox if it created it.
    pub async fn close(&self, id: &str) -> Result<SessionInfo, GatewayError> {
        let live = self.live(id).await?;
        self.shut(&live, "closed by its client").await?;
        self.session(id).await
    }

    async fn shut(&self, live: &Live, reason: &str) -> Result<(), GatewayError> {
        self.sessions_mut().remove(&live.id);
        let closed = self
            .inner
            .store
            .close_gateway_session(live.id.as_str(), now_ms(), reason)
            .await?;
        if closed && live.owns_sandbox {
            match self.inner.backend.destroy(&live.sandbox_id).await {
                Ok(()) | Err(forge_sandbox::SandboxError::NotFound { .. }) => {}
                Err(source) => {
                    return Err(GatewayError::Sandbox {
                        session: live.id.to_string(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// Closes every open session whose TTL has passed; returns their ids.
    pub async fn reap(&self) -> Result<Vec<SessionId>, GatewayError> {
        let now = now_ms();
        let mut reaped = Vec::new();
        for record in self.inner.store.open_gateway_sessions().await? {
            if record.expires_at_ms > now {
                continue;
            }
            if let Some(id) = SessionId::parse(&record.id) {
                let live = match self.cached(&id) {
                    Some(live) => live,
                    None => Arc::new(Live::from_record(&record, 0)?),
                };
                self.shut(&live, "expired: its session_ttl_seconds passed")
                    .await?;
                reaped.push(id);
            }
        }
        Ok(reaped)
    }

    /// The last `limit` ledger entries, of one session or of all, oldest first.
    pub async fn ledger(
        &self,
        session: Option<&str>,
        limit: u32,
    ) -> Result<Vec<LedgerEntry>, GatewayError> {
        let records = self.inner.store.ledger(session, i64::from(limit)).await?;
        Ok(records.into_iter().map(entry_from_record).collect())
    }

    /// Files a session exported.
    pub async fn artifacts(&self, id: &str) -> Result<Vec<Artifact>, GatewayError> {
        // Closed sessions keep their artifacts; only unknown ids are refused.
        self.session(id).await?;
        let dir = crate::tools::artifacts_dir(&self.inner.config.data_dir, id);
        tokio::task::spawn_blocking(move || list_files(&dir))
            .await
            .map_err(|join| GatewayError::DataDir {
                path: PathBuf::new(),
                source: std::io::Error::other(join),
            })?
    }

    /// Where a session's artifacts are on the host.
    pub fn artifacts_dir(&self, id: &SessionId) -> PathBuf {
        crate::tools::artifacts_dir(&self.inner.config.data_dir, id.as_str())
    }
}

fn list_files(dir: &std::path::Path) -> Result<Vec<Artifact>, GatewayError> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        let entries = match std::fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(GatewayError::DataDir {
                    path: current,
                    source,
                });
            }
        };
        for entry in entries {
            let entry = entry.map_err(|source| GatewayError::DataDir {
                path: current.clone(),
                source,
            })?;
            let path = entry.path();
            let meta = entry.metadata().map_err(|source| GatewayError::DataDir {
                path: path.clone(),
                source,
            })?;
            if meta.is_dir() {
                pending.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir) {
                out.push(Artifact {
                    path: relative.to_string_lossy().into_owned(),
                    bytes: meta.len(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn entry_from_record(record: LedgerRecord) -> LedgerEntry {
    LedgerEntry {
        seq: u64::try_from(record.seq).unwrap_or(0),
        ts_ms: record.ts_ms,
        session_id: record.session_id,
        tool: record.tool,
        arguments: record.arguments,
        decision: record
            .decision
            .and_then(|d| serde_json::from_value(Value::String(d)).ok()),
        rule: record.rule,
        reason: record.reason,
        outcome: Outcome::parse(&record.outcome).unwrap_or(Outcome::Failed),
        summary: record.summary,
        duration_us: u64::try_from(record.duration_us).unwrap_or(0),
        idempotency_key: record.idempotency_key,
        prev_hash: String::new(),
        hash: record.hash,
    }
}

/// Replaces the values of secret argument fields (every value of a map field).
fn hide_fields(arguments: &mut Value, fields: &[&str]) {
    for field in fields {
        match arguments.get_mut(*field) {
            Some(Value::Object(map)) => {
                for value in map.values_mut() {
                    *value = Value::String(REDACTED.to_owned());
                }
            }
            Some(value) => *value = Value::String(REDACTED.to_owned()),
            None => {}
        }
    }
}
