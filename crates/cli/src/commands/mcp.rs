//! `forge mcp`: the tool gateway over MCP on stdin/stdout, for clients that start their tools
//! as a child process (Claude Desktop, Cursor, the MCP Python SDK's `stdio_client`).
//!
//! The gateway runs in this process on `forge serve`'s data directory and config (the same
//! image store, state store and ledger). stdout carries MCP frames only: notes and logs go to
//! stderr.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use forge_gateway::Gateway;
use forge_mcp::{GatewayHost, ToolHost};
use forge_policy::Policy;
use forge_sandbox::{JailBackend, JailConfig};
use forge_server::ServerConfig;
use forge_server::config::{self, Overrides};
use forge_store::Store;
use forge_types::tool::SessionId;

use crate::cli::McpArgs;
use crate::output;

pub(crate) async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let attach = args
        .session
        .as_deref()
        .map(|id| {
            SessionId::parse(id).with_context(|| format!("{id:?} is not a gateway session id"))
        })
        .transpose()?;
    let policy = args
        .policy
        .as_deref()
        .map(|path| {
            let text = fs_err::read_to_string(path)?;
            Policy::from_toml(&text).with_context(|| format!("invalid policy {}", path.display()))
        })
        .transpose()?;
    let config = resolve_config(args.config.as_deref(), args.data_dir.clone())?;
    // No `recover()`: sandboxes already on disk belong to a server sharing this data
    // directory; this process only manages the one its session creates.
    let backend = JailBackend::new(JailConfig {
        registries: config.registries.clone(),
        ..JailConfig::new(&config.data_dir)
    })
    .context("cannot set up the sandbox backend")?;
    for note in backend.host_notes() {
        output::warning(&note);
    }
    let store = Store::open(&config.data_dir.join("forge.db"))
        .await
        .context("cannot open the state store")?;
    let gateway = Gateway::new(Arc::new(backend), store, config.gateway());
    let host = Arc::new(GatewayHost::new(gateway, policy));
    let owned = attach.is_none();
    let session = host
        .open(attach)
        .await
        .context("cannot open a gateway session")?;
    tracing::info!(session = %session, owned, "serving MCP on stdio");
    // Clients end a server by closing its stdin, or by a signal when they quit; either way the
    // session's sandbox must not outlive this process.
    let served = tokio::select! {
        served = forge_mcp::serve_stdio(host.clone(), session.clone()) => served,
        () = super::serve::shutdown_signal() => Ok(()),
    };
    // An attached session belongs to whoever opened it; ours ends with the client.
    if owned {
        host.close(&session).await;
    }
    served.context("mcp over stdio failed")?;
    Ok(ExitCode::SUCCESS)
}

/// `forge serve`'s settings for a data directory and config file (no listener involved).
fn resolve_config(
    file: Option<&std::path::Path>,
    data_dir: Option<std::path::PathBuf>,
) -> anyhow::Result<ServerConfig> {
    let file = crate::settings::config_file(file);
    let overrides = Overrides {
        data_dir,
        ..Overrides::default()
    };
    let default_data = crate::settings::data_dir(&crate::cli::DataDirArg { data_dir: None })?;
    let env = |name: &str| std::env::var(name).ok();
    Ok(config::load(
        file.as_deref(),
        &env,
        &overrides,
        default_data,
    )?)
}
