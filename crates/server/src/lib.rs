//! Forge's HTTP edge: one axum app on one port.
//!
//! The tool gateway's routes (`/sessions…`, `/tools…`, `/ledger`) serve
//! [`forge_gateway::Gateway`], which [`AppState`] owns.
//!
//! `/api/v1/sandboxes…`, `/templates…`, `/providers…`, `/snapshots`, `/pool/status`,
//! `/health`, `/metrics` and `/events` follow ForgeVM's wire contract, so its SDKs work
//! unchanged, with its gaps closed (timeouts enforced, a full pool answers 503, file
//! operations on unknown sandboxes answer 404, streamed exits reach the client, events carry
//! ids and replay). Beyond it: background processes, terminals over WebSocket, Prometheus
//! metrics at `/metrics`, and an OpenAPI document with an offline docs page. When the binary
//! hands it one ([`AppState::with_mcp`]), MCP Streamable HTTP at `/mcp`, behind the same key.
//!
//! [`app`] builds the router from an [`AppState`]; handlers hold no logic of their own
//! beyond translating the wire format — the behaviour lives in [`manager::Manager`].

pub mod config;
mod error;
mod events;
mod extract;
mod manager;
mod metrics;
mod middleware;
mod routes;
mod time;
pub mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use forge_sandbox::Backend;
use forge_store::Store;

pub use crate::config::ServerConfig;
pub use crate::error::{ApiError, Code};
pub use crate::manager::{Manager, Reconciled};

/// Everything handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    inner: Arc<Inner>,
    /// `/mcp`, when the binary wires a tool gateway under it.
    mcp: Option<forge_mcp::HttpEndpoint>,
}

#[derive(Debug)]
struct Inner {
    manager: Manager,
    gateway: forge_gateway::Gateway,
    started: Instant,
}

impl AppState {
    /// Builds the state; must be called within a tokio runtime (it starts the event writer).
    pub fn new(backend: Arc<dyn Backend>, store: Store, config: ServerConfig) -> Self {
        let events = events::EventBus::new(store.clone());
        let metrics = Arc::new(metrics::Metrics::default());
        let gateway = forge_gateway::Gateway::new(backend.clone(), store.clone(), config.gateway());
        let manager = Manager::new(backend, store, events, Arc::new(config), metrics);
        Self {
            inner: Arc::new(Inner {
                manager,
                gateway,
                started: Instant::now(),
            }),
            mcp: None,
        }
    }

    /// Serves MCP Streamable HTTP at `/mcp` from `endpoint`, behind the API key.
    #[must_use]
    pub fn with_mcp(mut self, endpoint: forge_mcp::HttpEndpoint) -> Self {
        self.mcp = Some(endpoint);
        self
    }

    pub fn mcp(&self) -> Option<&forge_mcp::HttpEndpoint> {
        self.mcp.as_ref()
    }

    /// The tool gateway (`/sessions…`, `/tools…`, `/ledger`, and the MCP adapter).
    pub fn gateway(&self) -> &forge_gateway::Gateway {
        &self.inner.gateway
    }

    pub fn manager(&self) -> &Manager {
        &self.inner.manager
    }

    pub fn config(&self) -> &ServerConfig {
        self.inner.manager.config()
    }

    pub fn uptime(&self) -> Duration {
        self.inner.started.elapsed()
    }

    /// Starts the warm pools of the stored templates.
    pub async fn start_pools(&self) -> Result<(), ApiError> {
        for template in self.manager().store().list_templates().await? {
            self.manager()
                .configure_pool(Some(&template), &template.name)
                .await;
        }
        Ok(())
    }

    /// Destroys expired sandboxes every `reaper_interval`, for as long as the server runs.
    pub fn spawn_reaper(&self) -> tokio::task::JoinHandle<()> {
        let state = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(state.config().reaper_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(err) = state.manager().reap().await {
                    tracing::warn!(error = err.message, "the TTL reaper failed; retrying");
                }
                if let Err(err) = state.gateway().reap().await {
                    tracing::warn!(error = %err, "the gateway session reaper failed; retrying");
                }
            }
        })
    }

    /// Waits until queued events and exec records are written.
    pub async fn flush(&self) {
        self.manager().events().flush().await;
    }
}

/// The whole HTTP app.
pub fn app(state: AppState) -> Router {
    routes::router(state)
}

/// Serves `app` on `listener` until `shutdown` completes.
pub async fn serve(
    state: AppState,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let reaper = state.spawn_reaper();
    let mcp = state.mcp().cloned();
    let shutdown = async move {
        shutdown.await;
        // MCP sessions hold event streams open; a graceful shutdown would wait on them.
        if let Some(mcp) = mcp {
            mcp.shutdown();
        }
    };
    let result = axum::serve(listener, app(state.clone()))
        .with_graceful_shutdown(shutdown)
        .await;
    reaper.abort();
    state.manager().shutdown_pools().await;
    state.flush().await;
    result
}
