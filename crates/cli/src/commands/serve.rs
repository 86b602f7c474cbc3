//! `forge serve`: the sandbox API over HTTP, on the jail backend and a SQLite store, with the
//! tool gateway over MCP at `/mcp`.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use forge_sandbox::{JailBackend, JailConfig};
use forge_server::config::{self, Overrides};
use forge_server::{AppState, ServerConfig};

use crate::cli::ServeArgs;
use crate::output;

pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let file = crate::settings::config_file(args.config.as_deref());
    let overrides = Overrides {
        listen: args.listen.clone(),
        api_key: args.api_key.clone(),
        data_dir: args.data_dir.clone(),
        max_sandboxes: args.max_sandboxes,
    };
    let default_data = crate::settings::data_dir(&crate::cli::DataDirArg { data_dir: None })?;
    let env = |name: &str| std::env::var(name).ok();
    let config: ServerConfig = config::load(file.as_deref(), &env, &overrides, default_data)?;
    let backend = JailBackend::new(JailConfig {
        registries: config.registries.clone(),
        resolver: forge_sandbox::net::Resolver::with_hosts(config.hosts.clone()),
        ..JailConfig::new(&config.data_dir)
    })
    .context("cannot set up the sandbox backend")?;
    for note in backend.host_notes() {
        output::warning(&note);
    }
    let store = forge_store::Store::open(&config.data_dir.join("forge.db"))
        .await
        .context("cannot open the state store")?;
    let recovery = backend.recover().await;
    let listen = config.listen;
    let state = AppState::new(Arc::new(backend), store, config.clone());
    // `/mcp` serves the same gateway as `/api/v1/sessions…`, so an MCP client can attach to a
    // session opened over HTTP.
    let mcp = forge_mcp::HttpEndpoint::new(
        Arc::new(forge_mcp::GatewayHost::new(state.gateway().clone(), None)),
        // With a key, a DNS-rebound page cannot authenticate, so any Host is fine (and
        // needed beyond loopback); without one, only loopback names are answered.
        forge_mcp::HttpOptions {
            any_host: config.api_key.is_some(),
        },
    );
    let state = state.with_mcp(mcp);
    let reconciled = state
        .manager()
        .reconcile(&recovery.adopted)
        .await
        .map_err(|err| {
            anyhow::anyhow!("cannot reconcile sandboxes with the store: {}", err.message)
        })?;
    if !(reconciled.kept.is_empty()
        && reconciled.lost.is_empty()
        && reconciled.unrecorded.is_empty())
    {
        output::note(&format!(
            "recovered after a restart: {} sandboxes still running, {} lost, {} unrecorded destroyed",
            reconciled.kept.len(),
            reconciled.lost.len() + recovery.removed.len(),
            reconciled.unrecorded.len()
        ));
    }
    state.start_pools().await.map_err(|err| {
        anyhow::anyhow!("cannot start the templates' warm pools: {}", err.message)
    })?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    output::note(&format!(
        "forge listening on http://{}  (API docs at /api/v1/docs, data in {}{})",
        listener.local_addr().unwrap_or(listen),
        config.data_dir.display(),
        if config.api_key.is_some() {
            ", API key required"
        } else {
            ""
        }
    ));
    forge_server::serve(state, listener, shutdown_signal())
        .await
        .context("the server stopped with an error")?;
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM.
pub(super) async fn shutdown_signal() {
    let terminate = async {
        if let Ok(mut signal) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            signal.recv().await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
