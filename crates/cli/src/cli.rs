//! The command line, as clap structs only.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Forge: sandboxes that start in milliseconds, a tool gateway and an orchestrator for AI
/// agents, in one binary.
#[derive(Debug, Parser)]
#[command(name = "forge", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// Log more (-v: debug, -vv: trace). `FORGE_LOG` takes a full filter instead.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub(crate) verbose: u8,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run commands in sandboxes.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Show what this host supports for sandboxes, and try one.
    Doctor(DoctorArgs),
    /// Measure Forge against baselines in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum SandboxCommand {
    /// Run one command in a fresh sandbox, stream its output, exit with its exit code and
    /// remove the sandbox (like `docker run --rm`).
    Run(Box<RunArgs>),
}

/// Where sandboxes keep their state.
#[derive(Debug, Args, Clone)]
pub(crate) struct DataDirArg {
    /// Data directory (default: /var/lib/forge as root, ~/.local/share/forge otherwise).
    #[arg(long, env = "FORGE_DATA_DIR", value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Memory limit, such as 256M or 1G.
    #[arg(long, value_name = "SIZE")]
    pub(crate) memory: Option<String>,
    /// Maximum number of processes and threads.
    #[arg(long, value_name = "N")]
    pub(crate) pids: Option<String>,
    /// CPU quota in CPUs, such as 1 or 0.5.
    #[arg(long, value_name = "CPUS")]
    pub(crate) cpus: Option<String>,
    /// Kill the command (and everything it started) after this long, such as 10s or 2m.
    #[arg(long, value_name = "DURATION")]
    pub(crate) timeout: Option<String>,
    /// Host directory to mount at /workspace (the command starts there).
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Image to start from.
    #[arg(long, default_value = "host")]
    pub(crate) image: String,
    /// Network mode: none (loopback only), allowlist or open.
    #[arg(long, default_value = "none")]
    pub(crate) network: String,
    /// Extra environment variables, as NAME=VALUE.
    #[arg(short, long = "env", value_name = "NAME=VALUE")]
    pub(crate) env: Vec<String>,
    /// Working directory inside the sandbox.
    #[arg(short = 'w', long, value_name = "DIR")]
    pub(crate) workdir: Option<String>,
    #[command(flatten)]
    pub(crate) data: DataDirArg,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    pub(crate) data: DataDirArg,
    /// Only print the host report; do not start a sandbox.
    #[arg(long)]
    pub(crate) no_sandbox: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Sandbox start, pooled and warm exec latency against plain spawn and bubblewrap,
    /// and the memory of idle sandboxes.
    Sandbox(BenchSandboxArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BenchSandboxArgs {
    /// Iterations per measurement.
    #[arg(long, default_value_t = 200)]
    pub(crate) iterations: usize,
    /// Idle sandboxes to start for the density measurement (0 skips it).
    #[arg(long, default_value_t = 1000)]
    pub(crate) density: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Instead, time the steps of a cold start one by one: create, first exec, second exec,
    /// destroy.
    #[arg(long)]
    pub(crate) breakdown: bool,
    #[command(flatten)]
    pub(crate) data: DataDirArg,
}
