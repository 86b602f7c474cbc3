//! The sandbox API's behaviour behind the handlers: spawning within the pool's capacity,
//! templates and their warm pools, TTLs and the reaper, the store's records and the events,
//! and reconciling all of it with what is really running after a restart.
//!
//! Ordering keeps the store truthful across crashes: a sandbox is recorded right after it
//! is created (a crash in between leaves a running sandbox with no record, which recovery
//! destroys), and marked destroyed only after the backend destroyed it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_image::ImageStore;
use forge_sandbox::{Backend, Pool, SandboxError};
use forge_store::{NewExec, SandboxRecord, Store, TemplateRecord};
use forge_types::{ExecRequest, ExecResult, Limits, NetworkMode, SandboxId, SandboxSpec};
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::{Overflow, ServerConfig};
use crate::error::{ApiError, Code};
use crate::events::EventBus;
use crate::metrics::Metrics;
use crate::time::now_ms;

/// The name backends go by in ForgeVM's `provider` field.
pub(crate) const PROVIDER: &str = "jail";

/// What a spawn asks for, after the wire request was read.
#[derive(Debug, Clone, Default)]
pub struct SpawnParams {
    pub image: Option<String>,
    pub memory_mb: Option<u64>,
    pub vcpus: Option<u64>,
    pub ttl: Option<Duration>,
    pub owner_id: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub template: Option<String>,
    /// The network mode asked for; a template's allowed hosts imply `allowlist`.
    pub network: Option<NetworkMode>,
    /// Destinations for `allowlist`, instead of the template's.
    pub allowed_hosts: Vec<String>,
}

/// Live sandboxes within the configured cap.
#[derive(Debug)]
struct Capacity {
    slots: Option<Arc<Semaphore>>,
    waiting: AtomicUsize,
    held: Mutex<HashMap<String, OwnedSemaphorePermit>>,
}

#[derive(Debug)]
pub struct Manager {
    backend: Arc<dyn Backend>,
    store: Store,
    events: EventBus,
    config: Arc<ServerConfig>,
    metrics: Arc<Metrics>,
    capacity: Capacity,
    pools: Mutex<HashMap<String, Arc<Pool>>>,
    /// One template layer is built at a time (and a spawn waits for the one it needs).
    template_builds: tokio::sync::Mutex<()>,
}

impl Manager {
    pub fn new(
        backend: Arc<dyn Backend>,
        store: Store,
        events: EventBus,
        config: Arc<ServerConfig>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let slots = config
            .max_sandboxes
            .map(|max| Arc::new(Semaphore::new(max)));
        if let Some(log) = backend.connection_log() {
            tokio::spawn(record_connections(log, events.clone()));
        }
        Self {
            backend,
            store,
            events,
            config,
            metrics,
            capacity: Capacity {
                slots,
                waiting: AtomicUsize::new(0),
                held: Mutex::new(HashMap::new()),
            },
            pools: Mutex::new(HashMap::new()),
            template_builds: tokio::sync::Mutex::new(()),
        }
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn events(&self) -> &EventBus {
        &self.events
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The sandbox's record, if it exists and is not destroyed.
    pub async fn live(&self, id: &str) -> Result<SandboxRecord, ApiError> {
        match self.store.get_sandbox(id).await? {
            Some(record) if record.state != "destroyed" => Ok(record),
            _ => Err(ApiError::not_found(format!("sandbox {id:?} not found"))),
        }
    }

    /// A valid sandbox id from a path segment (anything else cannot exist).
    pub fn parse_id(id: &str) -> Result<SandboxId, ApiError> {
        SandboxId::parse(id).ok_or_else(|| ApiError::not_found(format!("sandbox {id:?} not found")))
    }

    async fn reserve(&self) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
        let Some(slots) = &self.capacity.slots else {
            return Ok(None);
        };
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return Ok(Some(permit));
        }
        let full = |why: String| {
            self.metrics.spawn_rejected.fetch_add(1, Ordering::Relaxed);
            ApiError::new(Code::Unavailable, why)
        };
        let max = self.config.max_sandboxes.unwrap_or(0);
        match self.config.overflow {
            Overflow::Reject => Err(full(format!(
                "the pool is full: {max} sandboxes are running; destroy one or try later"
            ))),
            Overflow::Queue => {
                let waiting = self.capacity.waiting.fetch_add(1, Ordering::SeqCst);
                let result = if waiting >= self.config.queue_depth {
                    Err(full(format!(
                        "the pool is full and {waiting} spawns are already waiting"
                    )))
                } else {
                    match tokio::time::timeout(
                        self.config.queue_timeout,
                        slots.clone().acquire_owned(),
                    )
                    .await
                    {
                        Ok(Ok(permit)) => Ok(Some(permit)),
                        Ok(Err(_)) => Err(full("the pool is closed".to_owned())),
                        Err(_) => Err(full(format!(
                            "the pool stayed full for {}: {max} sandboxes are running",
                            forge_types::units::GoDuration(self.config.queue_timeout)
                        ))),
                    }
                };
                self.capacity.waiting.fetch_sub(1, Ordering::SeqCst);
                result
            }
        }
    }

    /// Spawns waiting for room right now.
    pub fn queued(&self) -> usize {
        self.capacity.waiting.load(Ordering::SeqCst)
    }

    /// Creates a sandbox (from a template's warm pool when it has one) and records it.
    pub async fn spawn(&self, params: SpawnParams) -> Result<SandboxRecord, ApiError> {
        let template = match &params.template {
            Some(name) => Some(
                self.store
                    .get_template(name)
                    .await?
                    .ok_or_else(|| ApiError::not_found(format!("template {name:?} not found")))?,
            ),
            None => None,
        };
        let mut spec = self.spec_for(&params, template.as_ref())?;
        if let Some(template) = &template {
            spec.image = self.template_image(template, &spec.image).await?;
        }
        let ttl = params
            .ttl
            .or_else(|| {
                template
                    .as_ref()
                    .map(|t| Duration::from_secs(u64::try_from(t.ttl_seconds.max(0)).unwrap_or(0)))
            })
            .unwrap_or(self.config.default_ttl);
        let permit = self.reserve().await?;
        let pool = template.as_ref().and_then(|t| self.pool(&t.name));
        let info = match &pool {
            Some(pool) => pool.acquire().await?,
            None => self.backend.create(spec.clone()).await?,
        };
        if pool.is_none()
            && self.backend.images().is_none()
            && let Some(template) = &template
            && let Err(err) = self.run_setup(&info.id, template).await
        {
            let _ = self.backend.destroy(&info.id).await;
            return Err(err.into());
        }
        let mut metadata = params.metadata.clone();
        if let Some(template) = &template {
            metadata.insert("template".to_owned(), template.name.clone());
        }
        let template = template.as_ref().map(|t| t.name.clone());
        self.record(info, &spec, ttl, &params, metadata, template, permit)
            .await
    }

    /// A new sandbox whose file system starts as a copy of `id`'s current one, with its
    /// limits and labels.
    pub async fn fork(&self, id: &str, ttl: Option<Duration>) -> Result<SandboxRecord, ApiError> {
        let original = self.live(id).await?;
        let sandbox = Self::parse_id(id)?;
        let permit = self.reserve().await?;
        let info = self.backend.fork(&sandbox).await?;
        let spec = info.spec.clone();
        let mut metadata = original.metadata.clone();
        metadata.insert("forked_from".to_owned(), original.id.clone());
        let params = SpawnParams {
            owner_id: original.owner_id.clone(),
            ..SpawnParams::default()
        };
        let ttl = ttl.unwrap_or(self.config.default_ttl);
        self.record(
            info,
            &spec,
            ttl,
            &params,
            metadata,
            original.template.clone(),
            permit,
        )
        .await
    }

    /// Records a sandbox the backend just created, holds its capacity and announces it.
    #[expect(clippy::too_many_arguments, reason = "the parts of one record")]
    async fn record(
        &self,
        info: forge_types::SandboxInfo,
        spec: &SandboxSpec,
        ttl: Duration,
        params: &SpawnParams,
        metadata: BTreeMap<String, String>,
        template: Option<String>,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<SandboxRecord, ApiError> {
        let now = now_ms();
        let record = SandboxRecord {
            id: info.id.to_string(),
            state: "running".to_owned(),
            image: spec.image.clone(),
            provider: PROVIDER.to_owned(),
            memory_mb: i64::try_from(spec.limits.memory_bytes >> 20).unwrap_or(i64::MAX),
            vcpus: i64::from(spec.limits.cpu_millis.div_ceil(1000)),
            owner_id: params.owner_id.clone().filter(|o| !o.is_empty()),
            metadata,
            spec: serde_json::to_value(&info.spec).unwrap_or(serde_json::Value::Null),
            template,
            created_at_ms: now,
            expires_at_ms: now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)),
            destroyed_at_ms: None,
            destroy_reason: None,
            init_pid: Some(i64::from(info.init_pid)),
        };
        if let Err(err) = self.store.insert_sandbox(&record).await {
            let _ = self.backend.destroy(&info.id).await;
            return Err(err.into());
        }
        if let Some(permit) = permit
            && let Ok(mut held) = self.capacity.held.lock()
        {
            held.insert(record.id.clone(), permit);
        }
        self.metrics
            .sandboxes_created
            .fetch_add(1, Ordering::Relaxed);
        let data = json!({
            "image": record.image,
            "template": record.template,
            "forked_from": record.metadata.get("forked_from"),
            "degraded": info.degraded,
        });
        self.events
            .publish("sandbox.created", Some(&record.id), Some(data));
        self.events
            .publish("sandbox.running", Some(&record.id), None);
        Ok(record)
    }

    fn spec_for(
        &self,
        params: &SpawnParams,
        template: Option<&TemplateRecord>,
    ) -> Result<SandboxSpec, ApiError> {
        let image = params
            .image
            .clone()
            .filter(|i| !i.is_empty())
            .or_else(|| template.map(|t| t.image.clone()))
            .unwrap_or_else(|| self.config.default_image.clone());
        let positive = |v: i64| u64::try_from(v).ok().filter(|v| *v > 0);
        let memory_mb = params
            .memory_mb
            .or_else(|| template.and_then(|t| positive(t.memory_mb)))
            .unwrap_or(self.config.default_memory_mb);
        let vcpus = params
            .vcpus
            .or_else(|| template.and_then(|t| positive(t.cpu_cores)))
            .unwrap_or(self.config.default_vcpus);
        let limits = Limits {
            memory_bytes: memory_mb.saturating_mul(1 << 20),
            cpu_millis: u32::try_from(vcpus.saturating_mul(1000))
                .map_err(|_| ApiError::field("vcpus", "too large"))?,
            ..Limits::default()
        };
        let allowed_hosts = if params.allowed_hosts.is_empty() {
            template
                .map(|t| t.allowed_hosts.clone())
                .unwrap_or_default()
        } else {
            params.allowed_hosts.clone()
        };
        let network = params.network.unwrap_or(if allowed_hosts.is_empty() {
            NetworkMode::None
        } else {
            NetworkMode::Allowlist
        });
        let spec = SandboxSpec {
            image,
            limits,
            network,
            allowed_hosts,
            env: template.map(|t| t.env.clone()).unwrap_or_default(),
            labels: params.metadata.clone(),
            ..SandboxSpec::default()
        };
        spec.validate().map_err(|err| {
            let field = match err.field {
                "limits.memory_bytes" => "memory_mb",
                "limits.cpu_millis" => "vcpus",
                other => other,
            };
            ApiError::field(field, err.reason)
        })?;
        Ok(spec)
    }

    async fn run_setup(
        &self,
        id: &SandboxId,
        template: &TemplateRecord,
    ) -> Result<(), SandboxError> {
        for command in &template.setup {
            let result = self
                .backend
                .exec(id, ExecRequest::shell(command.clone()))
                .await?;
            if !result.success() {
                return Err(SandboxError::SetupCommand {
                    command: command.clone(),
                    reason: format!(
                        "exit code {}: {}",
                        result.exit_code,
                        String::from_utf8_lossy(&result.stderr).trim()
                    ),
                });
            }
        }
        Ok(())
    }

    /// The image a template's sandboxes start from. A template with setup commands runs
    /// them once, in a sandbox on `base`, and keeps the result as an image every spawn of
    /// the template shares (named by a hash of the base, the commands and the environment,
    /// so a changed template builds a new one). A backend without an image store runs the
    /// commands in every sandbox instead (see [`Manager::spawn`]).
    pub async fn template_image(
        &self,
        template: &TemplateRecord,
        base: &str,
    ) -> Result<String, ApiError> {
        let Some(images) = self.backend.images() else {
            return Ok(base.to_owned());
        };
        if template.setup.is_empty() {
            self.lease_template(&images, template, base).await;
            return Ok(base.to_owned());
        }
        let _build = self.template_builds.lock().await;
        let base_id = match lookup(&images, base).await? {
            Some(image) => image.id,
            // Not in the store yet: the build's sandbox pulls it.
            None => String::new(),
        };
        let reference = template_reference(template, base, &base_id);
        if lookup(&images, &reference).await?.is_some() {
            self.lease_template(&images, template, &reference).await;
            return Ok(reference);
        }
        let spec = SandboxSpec {
            image: base.to_owned(),
            env: template.env.clone(),
            ..SandboxSpec::default()
        };
        let info = self.backend.create(spec).await?;
        let built = async {
            self.run_setup(&info.id, template).await?;
            self.backend.snapshot(&info.id, &reference).await
        }
        .await;
        let _ = self.backend.destroy(&info.id).await;
        built?;
        // Named for what it is: the template's layer, not a user's snapshot.
        let name = template.name.clone();
        let store = images.clone();
        let wanted = reference.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let mut image = store.get(&wanted)?;
            image.source = forge_types::ImageSource::Template { template: name };
            store.insert(image)
        })
        .await;
        // A rebuilt template's previous layer goes unless a sandbox still uses it.
        self.drop_template_images(&images, template, Some(&reference))
            .await;
        self.lease_template(&images, template, &reference).await;
        self.events.publish(
            "template.built",
            None,
            Some(json!({"template": template.name, "image": reference})),
        );
        Ok(reference)
    }

    /// Marks `image` as used by the template, so it is neither removed nor collected while
    /// the template exists. Best effort: an image that is not in the store yet has nothing
    /// to keep.
    async fn lease_template(
        &self,
        images: &Arc<ImageStore>,
        template: &TemplateRecord,
        image: &str,
    ) {
        let store = images.clone();
        let holder = template_holder(&template.name);
        let image = image.to_owned();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(found) = store.find(&image)? {
                store.lease(&holder, &found)?;
            }
            Ok::<(), forge_image::ImageError>(())
        })
        .await;
    }

    /// Releases a deleted template's images: its lease and the layers built for it
    /// (except `keep`). Sandboxes still running on them keep their layers until they go.
    pub async fn forget_template(&self, template: &TemplateRecord) {
        let Some(images) = self.backend.images() else {
            return;
        };
        self.drop_template_images(&images, template, None).await;
        let holder = template_holder(&template.name);
        let _ = tokio::task::spawn_blocking(move || images.release(&holder)).await;
    }

    async fn drop_template_images(
        &self,
        images: &Arc<ImageStore>,
        template: &TemplateRecord,
        keep: Option<&str>,
    ) {
        let store = images.clone();
        let name = template.name.clone();
        let keep = keep.map(str::to_owned);
        let _ = tokio::task::spawn_blocking(move || {
            for image in store.list()? {
                let built_for_it = matches!(
                    &image.source,
                    forge_types::ImageSource::Template { template } if *template == name
                );
                if built_for_it && keep.as_deref() != Some(image.reference.as_str()) {
                    store.remove(&image.reference, true)?;
                }
            }
            Ok::<(), forge_image::ImageError>(())
        })
        .await;
    }

    /// Destroys a sandbox and records why; a no-op for unknown or destroyed ones.
    pub async fn destroy(&self, id: &str, reason: &str) -> Result<bool, ApiError> {
        let Some(record) = self.store.get_sandbox(id).await? else {
            return Ok(false);
        };
        if record.state == "destroyed" {
            return Ok(false);
        }
        if let Some(sandbox) = SandboxId::parse(id) {
            match self.backend.destroy(&sandbox).await {
                Ok(()) | Err(SandboxError::NotFound { .. }) => {}
                Err(err) => return Err(err.into()),
            }
        }
        if !self.store.mark_destroyed(id, now_ms(), reason).await? {
            return Ok(false);
        }
        if let Ok(mut held) = self.capacity.held.lock() {
            held.remove(id);
        }
        self.metrics
            .sandboxes_destroyed
            .fetch_add(1, Ordering::Relaxed);
        self.events.publish(
            "sandbox.destroyed",
            Some(id),
            Some(json!({"reason": reason})),
        );
        Ok(true)
    }

    /// Sets the expiry to now plus `ttl` (reset, not added: ForgeVM's semantics).
    pub async fn extend(&self, id: &str, ttl: Duration) -> Result<SandboxRecord, ApiError> {
        self.live(id).await?;
        let expires = now_ms().saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
        if !self.store.set_expiry(id, expires).await? {
            return Err(ApiError::not_found(format!("sandbox {id:?} not found")));
        }
        self.events.publish(
            "sandbox.extended",
            Some(id),
            Some(json!({"expires_at": crate::time::rfc3339(expires)})),
        );
        self.live(id).await
    }

    /// Destroys every sandbox whose TTL has passed; returns how many.
    pub async fn reap(&self) -> Result<u64, ApiError> {
        let mut reaped = 0;
        for id in self.store.expired_sandboxes(now_ms()).await? {
            match self.destroy(&id, "expired").await {
                Ok(true) => {
                    reaped += 1;
                    self.metrics
                        .sandboxes_expired
                        .fetch_add(1, Ordering::Relaxed);
                    self.events.publish("sandbox.expired", Some(&id), None);
                }
                Ok(false) => {}
                Err(err) => tracing::warn!(
                    sandbox = id,
                    error = err.message,
                    "the reaper could not destroy an expired sandbox"
                ),
            }
        }
        Ok(reaped)
    }

    /// Runs a command and records it in the exec log.
    pub async fn exec(&self, id: &SandboxId, request: ExecRequest) -> Result<ExecResult, ApiError> {
        let started = now_ms();
        let clock = Instant::now();
        let command = request.command.display();
        let result = self.backend.exec(id, request).await?;
        self.log_exec(id, &command, &result, started, clock.elapsed(), false);
        Ok(result)
    }

    /// Records a finished command (run to completion or streamed).
    pub fn log_exec(
        &self,
        id: &SandboxId,
        command: &str,
        result: &ExecResult,
        started_ms: i64,
        took: Duration,
        streamed: bool,
    ) {
        self.metrics
            .record_exec(took, result.timed_out, result.oom_killed);
        let entry = NewExec {
            sandbox_id: id.to_string(),
            command: command.to_owned(),
            exit_code: i64::from(result.exit_code),
            signal: result.signal.map(i64::from),
            duration_us: i64::try_from(result.duration_us).unwrap_or(i64::MAX),
            started_at_ms: started_ms,
            timed_out: result.timed_out,
            oom_killed: result.oom_killed,
            streamed,
        };
        self.events.log_exec(entry);
        let data = json!({"command": command, "exit_code": result.exit_code, "timed_out": result.timed_out, "oom_killed": result.oom_killed});
        self.events
            .publish("exec.completed", Some(id.as_str()), Some(data));
    }

    /// Makes the store and the running sandboxes agree after a restart: sandboxes the
    /// backend took back keep their records; recorded sandboxes that are gone are marked
    /// destroyed; running sandboxes without a record are destroyed. Nothing keeps running
    /// unaccounted for.
    pub async fn reconcile(&self, adopted: &[SandboxId]) -> Result<Reconciled, ApiError> {
        let mut outcome = Reconciled::default();
        let adopted_ids: Vec<String> = adopted.iter().map(ToString::to_string).collect();
        for record in self.store.list_sandboxes(false).await? {
            if adopted_ids.contains(&record.id) {
                if let Some(slots) = &self.capacity.slots
                    && let Ok(permit) = slots.clone().try_acquire_owned()
                    && let Ok(mut held) = self.capacity.held.lock()
                {
                    held.insert(record.id.clone(), permit);
                }
                outcome.kept.push(record.id);
            } else if self
                .store
                .mark_destroyed(
                    &record.id,
                    now_ms(),
                    "lost: the server stopped and its sandbox did not survive",
                )
                .await?
            {
                self.events.publish("sandbox.lost", Some(&record.id), None);
                self.events.publish(
                    "sandbox.destroyed",
                    Some(&record.id),
                    Some(json!({"reason": "lost"})),
                );
                outcome.lost.push(record.id);
            }
        }
        for id in adopted {
            if !outcome.kept.contains(&id.to_string()) {
                let _ = self.backend.destroy(id).await;
                self.events.publish(
                    "sandbox.destroyed",
                    Some(id.as_str()),
                    Some(json!({"reason": "unrecorded"})),
                );
                outcome.unrecorded.push(id.to_string());
            }
        }
        Ok(outcome)
    }

    /// The warm pool of a template, if it has one.
    fn pool(&self, template: &str) -> Option<Arc<Pool>> {
        self.pools.lock().ok()?.get(template).cloned()
    }

    /// Starts, replaces or stops a template's warm pool to match its `pool_size`.
    pub async fn configure_pool(&self, template: Option<&TemplateRecord>, name: &str) {
        let old = self.pools.lock().ok().and_then(|mut p| p.remove(name));
        if let Some(old) = old {
            old.shutdown().await;
        }
        let Some(template) = template else { return };
        let size = usize::try_from(template.pool_size).unwrap_or(0);
        if size == 0 {
            // Without a pool, the template's layer is built now only if its base is at
            // hand; otherwise the first spawn fetches the base and builds it.
            if let Some(images) = self.backend.images()
                && matches!(lookup(&images, &template.image).await, Ok(Some(_)))
                && let Err(err) = self.template_image(template, &template.image).await
            {
                tracing::warn!(
                    template = name,
                    error = err.message,
                    "cannot build the template's image yet"
                );
            }
            return;
        }
        let params = SpawnParams {
            template: Some(template.name.clone()),
            ..SpawnParams::default()
        };
        let spec = match self.spec_for(&params, Some(template)) {
            Ok(spec) => spec,
            Err(err) => {
                tracing::warn!(
                    template = name,
                    error = err.message,
                    "cannot keep a warm pool for this template"
                );
                return;
            }
        };
        let (spec, setup) = if self.backend.images().is_some() {
            match self.template_image(template, &spec.image).await {
                Ok(image) => (SandboxSpec { image, ..spec }, Vec::new()),
                Err(err) => {
                    tracing::warn!(
                        template = name,
                        error = err.message,
                        "cannot build the template's image; its pool stays empty until it can"
                    );
                    return;
                }
            }
        } else {
            let setup = template
                .setup
                .iter()
                .map(|c| ExecRequest::shell(c.clone()))
                .collect();
            (spec, setup)
        };
        let pool = Pool::with_setup(self.backend.clone(), spec, setup, size);
        if let Ok(mut pools) = self.pools.lock() {
            pools.insert(name.to_owned(), Arc::new(pool));
        }
    }

    /// Ready warm sandboxes per template.
    pub fn warm(&self) -> Vec<(String, u64)> {
        let mut warm: Vec<(String, u64)> = self
            .pools
            .lock()
            .map(|pools| {
                pools
                    .iter()
                    .map(|(name, pool)| (name.clone(), pool.status().ready as u64))
                    .collect()
            })
            .unwrap_or_default();
        warm.sort();
        warm
    }

    /// Stops the warm pools and destroys what they hold.
    pub async fn shutdown_pools(&self) {
        let pools: Vec<Arc<Pool>> = self
            .pools
            .lock()
            .map(|mut p| p.drain().map(|(_, pool)| pool).collect())
            .unwrap_or_default();
        for pool in pools {
            pool.shutdown().await;
        }
    }
}

/// The image store's entry for `name`, looked up off the async threads.
async fn lookup(
    images: &Arc<ImageStore>,
    name: &str,
) -> Result<Option<forge_image::Image>, ApiError> {
    let store = images.clone();
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || store.find(&name))
        .await
        .map_err(|e| ApiError::internal("look up an image", &e))?
        .map_err(ApiError::from)
}

/// The name of a template's built image: `forge.local/template/<name>:<hash>`, the hash
/// covering the base image, the setup commands and the environment.
fn template_reference(template: &TemplateRecord, base: &str, base_id: &str) -> String {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    for part in [base, base_id] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    for command in &template.setup {
        hasher.update(command.as_bytes());
        hasher.update([0]);
    }
    for (key, value) in &template.env {
        hasher.update(format!("{key}={value}").as_bytes());
        hasher.update([0]);
    }
    let digest = hasher.finalize();
    let tag = digest.iter().take(8).fold(String::new(), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    });
    format!(
        "forge.local/template/{}:{tag}",
        repository_part(&template.name)
    )
}

/// A template name as one lower-case repository path component.
fn repository_part(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches('-');
    if trimmed.is_empty() {
        "template".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The lease holder that stands for a template.
fn template_holder(name: &str) -> String {
    format!("template-{}", repository_part(name))
}

/// What [`Manager::reconcile`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reconciled {
    pub kept: Vec<String>,
    pub lost: Vec<String>,
    pub unrecorded: Vec<String>,
}

/// Copies the backend's connection attempts into the connection log and the event stream.
async fn record_connections(
    mut log: tokio::sync::broadcast::Receiver<forge_types::Connection>,
    events: EventBus,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match log.recv().await {
            Ok(c) => events.log_connection(forge_store::ConnectionRecord {
                id: 0,
                sandbox_id: c.sandbox_id.to_string(),
                started_at_ms: i64::try_from(c.started_at_ms).unwrap_or(i64::MAX),
                kind: match c.kind {
                    forge_types::ConnectionKind::Connect => "connect",
                    forge_types::ConnectionKind::Http => "http",
                }
                .to_owned(),
                host: c.host,
                port: i64::from(c.port),
                address: c.address,
                verdict: match c.verdict {
                    forge_types::Verdict::Allowed => "allowed",
                    forge_types::Verdict::Refused => "refused",
                }
                .to_owned(),
                reason: c.reason,
                bytes_up: i64::try_from(c.bytes_up).unwrap_or(i64::MAX),
                bytes_down: i64::try_from(c.bytes_down).unwrap_or(i64::MAX),
                duration_ms: i64::try_from(c.duration_ms).unwrap_or(i64::MAX),
            }),
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "the connection log fell behind; records were dropped"
                );
            }
            Err(RecvError::Closed) => return,
        }
    }
}
