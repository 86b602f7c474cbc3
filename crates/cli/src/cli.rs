//! The command line, as clap structs only.

use std::path::PathBuf;
use std::time::Duration;

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
    /// Serve the sandbox API (ForgeVM-compatible) over HTTP.
    Serve(Box<ServeArgs>),
    /// Serve the tool gateway to one MCP client over stdin/stdout (one session, until stdin
    /// closes), on the same data directory and config as `forge serve`.
    Mcp(Box<McpArgs>),
    /// Create a sandbox on a server.
    Spawn(SpawnArgs),
    /// List a server's sandboxes.
    List(ClientArgs),
    /// Run a command in a sandbox on a server, stream its output, exit with its code.
    Exec(ExecArgs),
    /// Move files in and out of a sandbox on a server.
    #[command(subcommand)]
    Files(FilesCommand),
    /// Destroy sandboxes on a server.
    Kill(KillArgs),
    /// Destroy a server's expired sandboxes.
    Prune(ClientArgs),
    /// Save a sandbox on a server as an image.
    Snapshot(SnapshotArgs),
    /// Start a copy-on-write copy of a sandbox on a server.
    Fork(ForkArgs),
    /// Expose a sandbox port on the host and print the host address (or list, or remove).
    Port(PortArgs),
    /// Run commands in sandboxes.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Manage images: pull from registries, import archives, build Debian images.
    #[command(subcommand)]
    Image(ImageCommand),
    /// Show what this host supports for sandboxes, and try one.
    Doctor(DoctorArgs),
    /// Measure Forge against baselines in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The tool gateway's tools on a server: list them, call one in a session.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// The tool gateway's ledger: the last calls (from a server), or verify the hash chain of
    /// a data directory's ledger file.
    #[command(subcommand)]
    Ledger(LedgerCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// List the gateway's tools (with --session, only those the session may call).
    Ls {
        #[command(flatten)]
        client: ClientArgs,
        /// A session id: list only its tools.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
    /// Call a tool in a session; exits 1 unless the call ran and succeeded.
    Call {
        #[command(flatten)]
        client: ClientArgs,
        /// The tool, such as `read_file`.
        tool: String,
        /// The session to call it in.
        #[arg(long, value_name = "ID")]
        session: String,
        /// The arguments, a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// A key that makes a retried call return the recorded reply instead of running again.
        #[arg(long, value_name = "KEY")]
        idempotency_key: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum LedgerCommand {
    /// Show the last recorded tool calls.
    Tail {
        #[command(flatten)]
        client: ClientArgs,
        /// Only this session's calls.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// How many.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: u32,
    },
    /// Check the ledger file's hash chain; exits 1 naming the first bad line.
    Verify {
        #[command(flatten)]
        data: DataDirArg,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SandboxCommand {
    /// Run one command in a fresh sandbox, stream its output, exit with its exit code and
    /// remove the sandbox (like `docker run --rm`).
    Run(Box<RunArgs>),
}

#[derive(Debug, Subcommand)]
pub(crate) enum ImageCommand {
    /// List images (the built-in host base first).
    Ls {
        #[command(flatten)]
        store: ImageArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Pull an image from its registry (or a configured mirror).
    Pull {
        #[command(flatten)]
        store: ImageArgs,
        /// Such as alpine:latest, ghcr.io/org/tool:1 or name@sha256:….
        reference: String,
        /// Platform to take from multi-platform images, such as linux/arm64.
        #[arg(long, value_name = "OS/ARCH")]
        platform: Option<String>,
    },
    /// Import a `docker save` / `podman save` archive or an OCI layout (directory or tar).
    Import(ImageImportArgs),
    /// Build a Debian image with mmdebstrap from this machine's Debian mirror.
    Build(ImageBuildArgs),
    /// Remove images; layers nothing else uses are deleted.
    Rm {
        #[command(flatten)]
        store: ImageArgs,
        /// Names or id prefixes.
        #[arg(required = true)]
        names: Vec<String>,
        /// Remove even images sandboxes or templates use (their layers stay until they go).
        #[arg(long)]
        force: bool,
    },
    /// Delete what nothing uses: forks' leftover images, unreferenced layers and blobs.
    Prune {
        #[command(flatten)]
        store: ImageArgs,
    },
}

/// Where the image store is, and where registry settings come from.
#[derive(Debug, Args, Clone)]
pub(crate) struct ImageArgs {
    #[command(flatten)]
    pub(crate) data: DataDirArg,
    /// Config file whose [images] table sets mirrors, plain-HTTP registries and credentials
    /// (default: as for `forge serve`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ImageImportArgs {
    #[command(flatten)]
    pub(crate) store: ImageArgs,
    /// The archive (tar, possibly compressed) or OCI layout directory.
    pub(crate) file: PathBuf,
    /// Name for the image (required when the archive names none).
    #[arg(long)]
    pub(crate) name: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ImageBuildArgs {
    #[command(flatten)]
    pub(crate) store: ImageArgs,
    /// Name of the image to create.
    pub(crate) name: String,
    /// Debian suite.
    #[arg(long, default_value = "bookworm")]
    pub(crate) suite: String,
    /// Packages to install, comma-separated or repeated.
    #[arg(long, value_name = "PKG,…")]
    pub(crate) packages: Vec<String>,
    /// Package set to start from: essential, apt, required, minbase or important.
    #[arg(long, default_value = "apt")]
    pub(crate) variant: String,
    /// Debian mirror URL (default: the one apt on this machine uses).
    #[arg(long, value_name = "URL")]
    pub(crate) mirror: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct SnapshotArgs {
    #[command(flatten)]
    pub(crate) client: ClientArgs,
    /// The sandbox to save.
    pub(crate) id: String,
    /// Name of the new image (default: snapshot/<id>:<time>).
    #[arg(long)]
    pub(crate) name: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ForkArgs {
    #[command(flatten)]
    pub(crate) client: ClientArgs,
    /// The sandbox to copy.
    pub(crate) id: String,
    /// Lifetime of the copy, such as 30m (default: the server's).
    #[arg(long, value_name = "DURATION")]
    pub(crate) ttl: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct PortArgs {
    #[command(flatten)]
    pub(crate) client: ClientArgs,
    /// The sandbox.
    pub(crate) id: String,
    /// The port inside the sandbox; without it, the exposed ports are listed.
    pub(crate) port: Option<u16>,
    /// The host port (default: a free one).
    #[arg(long, value_name = "PORT")]
    pub(crate) host_port: Option<u16>,
    /// Stop exposing the port instead.
    #[arg(long)]
    pub(crate) remove: bool,
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
    /// Image to start from (pulled first when it is not in the store).
    #[arg(long, default_value = "host")]
    pub(crate) image: String,
    /// Config file whose [images] table sets registries and mirrors (default: as for
    /// `forge serve`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Network mode: none (loopback only), allowlist (through Forge's egress proxy, to the
    /// --allow destinations) or open.
    #[arg(long, default_value = "none")]
    pub(crate) network: String,
    /// A destination for --network allowlist (repeatable): a host, `*.example.org`, an
    /// address or CIDR, each with an optional `:port`. Implies --network allowlist.
    #[arg(long = "allow", value_name = "HOST")]
    pub(crate) allow: Vec<String>,
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
    /// What the HTTP API adds: spawn + exec + destroy, warm exec and exec throughput over
    /// HTTP, each against the same backend called directly.
    Server(BenchServerArgs),
    /// A cold start on an image's layers against one on the host base.
    Image(BenchImageArgs),
    /// The egress proxy's throughput and added latency against a direct connection.
    Net(BenchNetArgs),
    /// What the tool gateway adds to a call (validate + decide + run + record): `read_file`
    /// of a 4 KiB file through the gateway against the same backend read directly.
    Gateway(BenchGatewayArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BenchGatewayArgs {
    /// Calls of each.
    #[arg(long, default_value_t = 2000)]
    pub(crate) iterations: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) data: DataDirArg,
}

#[derive(Debug, Args)]
pub(crate) struct BenchNetArgs {
    /// Size of the download, in megabytes.
    #[arg(long, default_value_t = 100)]
    pub(crate) megabytes: u64,
    /// Downloads per path (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
    /// Small requests per path, for the added latency.
    #[arg(long, default_value_t = 50)]
    pub(crate) requests: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) data: DataDirArg,
}

#[derive(Debug, Args)]
pub(crate) struct BenchImageArgs {
    /// The image to start (pull or import it first).
    #[arg(long)]
    pub(crate) image: String,
    /// Cold starts of each.
    #[arg(long, default_value_t = 200)]
    pub(crate) iterations: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) data: DataDirArg,
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

#[derive(Debug, Args)]
pub(crate) struct BenchServerArgs {
    /// Iterations of spawn + exec + destroy; the warm exec runs five times as many.
    #[arg(long, default_value_t = 200)]
    pub(crate) iterations: usize,
    /// Concurrent clients in the throughput measurement, each with its own sandbox.
    #[arg(long, default_value_t = 50)]
    pub(crate) clients: usize,
    /// Wall time of each throughput round, such as 5s.
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = forge_types::units::parse_duration)]
    pub(crate) duration: Duration,
    /// Throughput rounds per path; rounds alternate which path goes first.
    #[arg(long, default_value_t = 2)]
    pub(crate) rounds: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) data: DataDirArg,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Config file (TOML); default: FORGE_CONFIG, then /etc/forge/config.toml (root) or
    /// ~/.config/forge/config.toml, when present.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Address to listen on (FORGE_LISTEN; default 127.0.0.1:7423). Anything beyond loopback
    /// needs an API key.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<String>,
    /// API key clients must send in X-API-Key (FORGE_API_KEY).
    #[arg(long, value_name = "KEY")]
    pub(crate) api_key: Option<String>,
    /// Most sandboxes alive at once, 0 for no cap (FORGE_MAX_SANDBOXES; default 100).
    #[arg(long, value_name = "N")]
    pub(crate) max_sandboxes: Option<usize>,
    /// Data directory (FORGE_DATA_DIR).
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// Config file (TOML), as for `forge serve`.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Data directory (FORGE_DATA_DIR), as for `forge serve`.
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Attach to this open gateway session instead of opening one; it stays open at exit.
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,
    /// Policy (TOML) of the session to open; default: the gateway's default policy. The
    /// operator's ceilings narrow it either way.
    #[arg(long, value_name = "FILE", conflicts_with = "session")]
    pub(crate) policy: Option<PathBuf>,
}

/// How to reach a server.
#[derive(Debug, Args, Clone)]
pub(crate) struct ClientArgs {
    /// Server URL.
    #[arg(
        long,
        env = "FORGE_URL",
        default_value = "http://127.0.0.1:7423",
        global = true
    )]
    pub(crate) url: String,
    /// API key (sent as X-API-Key).
    #[arg(long, env = "FORGE_API_KEY", hide_env_values = true, global = true)]
    pub(crate) api_key: Option<String>,
    /// Print JSON instead of text for people.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SpawnArgs {
    #[command(flatten)]
    pub(crate) client: ClientArgs,
    /// Image to start from.
    #[arg(long)]
    pub(crate) image: Option<String>,
    /// Time to live, such as 30m or 2h.
    #[arg(long)]
    pub(crate) ttl: Option<String>,
    /// Spawn from a template.
    #[arg(long)]
    pub(crate) template: Option<String>,
    /// Memory limit in MiB.
    #[arg(long, value_name = "MIB")]
    pub(crate) memory_mb: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    pub(crate) client: ClientArgs,
    /// The sandbox.
    pub(crate) id: String,
    /// Kill the command after this long, such as 10s.
    #[arg(long)]
    pub(crate) timeout: Option<String>,
    /// Working directory inside the sandbox.
    #[arg(short = 'w', long)]
    pub(crate) workdir: Option<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum FilesCommand {
    /// Copy a file out of a sandbox (to stdout when no destination is given).
    Get {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
        /// Path inside the sandbox.
        path: String,
        /// Local file to write.
        dest: Option<PathBuf>,
    },
    /// Copy a local file into a sandbox.
    Put {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
        /// Local file.
        source: PathBuf,
        /// Path inside the sandbox.
        path: String,
    },
    /// List a directory in a sandbox.
    Ls {
        #[command(flatten)]
        client: ClientArgs,
        id: String,
        /// Directory inside the sandbox.
        #[arg(default_value = "/workspace")]
        path: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct KillArgs {
    #[command(flatten)]
    pub(crate) client: ClientArgs,
    /// Sandboxes to destroy.
    #[arg(required = true)]
    pub(crate) ids: Vec<String>,
}
