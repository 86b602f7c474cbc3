//! Server settings: defaults, then a TOML file, then `FORGE_*` environment variables, then
//! command-line flags — each later source overrides the earlier ones. The result is one
//! resolved [`ServerConfig`] with no optional fields left to interpret.
//!
//! ```toml
//! [server]
//! listen = "127.0.0.1:7423"    # FORGE_LISTEN
//! api_key = "…"                # FORGE_API_KEY
//! data_dir = "/var/lib/forge"  # FORGE_DATA_DIR
//! max_body_bytes = 67108864
//!
//! [defaults]
//! image = "host"
//! memory_mb = 512
//! vcpus = 1
//! ttl = "30m"
//! exec_timeout = "10m"         # applied when a request sets no timeout; "0s" for none
//!
//! [pool]
//! max_sandboxes = 100          # FORGE_MAX_SANDBOXES; 0 for no cap
//! overflow = "reject"          # or "queue"
//! queue_timeout = "30s"
//! queue_depth = 64
//!
//! [network]
//! port_bind = "127.0.0.1"      # where exposed sandbox ports listen; beyond loopback needs a key
//! [network.hosts]              # names the egress proxy resolves itself, before DNS
//! "pypi.internal.example" = ["203.0.113.7"]
//! [gateway]                    # ceilings no tool-gateway session can exceed
//! max_execution_seconds = 600
//! call_budget = 10000
//! network = { mode = "allowlist", hosts = ["pypi.org", "*.pythonhosted.org"] }
//!
//! [images]
//! pull_missing = true          # spawning an image not in the store pulls it
//! platform = "linux/amd64"     # from multi-platform images; the host's by default
//! insecure = ["registry.lan:5000"]  # plain HTTP (loopback registries always are)
//! max_upload_bytes = 8589934592     # largest archive POST /images/import accepts
//! [images.mirrors]
//! "docker.io" = ["mirror.lan:5000"] # tried in order before the registry itself
//! [images.credentials."ghcr.io"]
//! username = "me"
//! password = "…"               # or `docker login`'s ~/.docker/config.json
//! ```

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use forge_types::units::parse_duration;
use serde::Deserialize;

/// Environment variables the server reads (each overrides the file's value).
pub const ENV_LISTEN: &str = "FORGE_LISTEN";
pub const ENV_API_KEY: &str = "FORGE_API_KEY";
pub const ENV_DATA_DIR: &str = "FORGE_DATA_DIR";
pub const ENV_MAX_SANDBOXES: &str = "FORGE_MAX_SANDBOXES";
pub const ENV_CONFIG: &str = "FORGE_CONFIG";

/// What a full pool does with one more spawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Overflow {
    /// Answer 503 `UNAVAILABLE` at once.
    Reject,
    /// Wait (in a bounded queue, for a bounded time) for a sandbox to go away.
    Queue,
}

impl Overflow {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reject => "reject",
            Self::Queue => "queue",
        }
    }
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub api_key: Option<String>,
    pub data_dir: PathBuf,
    pub max_body_bytes: usize,
    pub default_image: String,
    pub default_memory_mb: u64,
    pub default_vcpus: u64,
    pub default_ttl: Duration,
    /// `None`: commands run until they finish unless the request sets a timeout.
    pub default_exec_timeout: Option<Duration>,
    /// `None`: no cap on live sandboxes.
    pub max_sandboxes: Option<usize>,
    pub overflow: Overflow,
    pub queue_timeout: Duration,
    pub queue_depth: usize,
    pub reaper_interval: Duration,
    /// Registries, mirrors and credentials for pulls.
    pub registries: forge_image::RegistryConfig,
    /// Largest archive `POST /images/import` accepts.
    pub max_image_bytes: u64,
    /// The address exposed sandbox ports listen on.
    pub port_bind: IpAddr,
    /// Names the egress proxy of allowlist sandboxes resolves itself, before DNS.
    pub hosts: BTreeMap<String, Vec<IpAddr>>,
    /// The most any tool-gateway session may get, whatever its client asks for.
    pub gateway_ceilings: forge_policy::Ceilings,
}

impl ServerConfig {
    /// Defaults for a data directory (what tests and `forge serve` without a file use).
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7423)),
            api_key: None,
            data_dir: data_dir.into(),
            max_body_bytes: 64 << 20,
            default_image: forge_types::sandbox::HOST_IMAGE.to_owned(),
            default_memory_mb: 512,
            default_vcpus: 1,
            default_ttl: Duration::from_mins(30),
            default_exec_timeout: Some(Duration::from_mins(10)),
            max_sandboxes: Some(100),
            overflow: Overflow::Reject,
            queue_timeout: Duration::from_secs(30),
            queue_depth: 64,
            reaper_interval: Duration::from_secs(1),
            registries: forge_image::RegistryConfig::default(),
            max_image_bytes: 8 << 30,
            port_bind: IpAddr::from([127, 0, 0, 1]),
            hosts: BTreeMap::new(),
            gateway_ceilings: forge_policy::Ceilings::default(),
        }
    }

    /// The tool gateway's settings, for the server's gateway and `forge mcp`'s alike.
    pub fn gateway(&self) -> forge_gateway::GatewayConfig {
        forge_gateway::GatewayConfig {
            data_dir: self.data_dir.clone(),
            ceilings: self.gateway_ceilings.clone(),
            image: self.default_image.clone(),
        }
    }

    /// Refuses to listen beyond loopback without an API key.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !self.listen.ip().is_loopback() && self.api_key.as_deref().is_none_or(str::is_empty) {
            return Err(ConfigError::OpenWithoutKey {
                listen: self.listen,
            });
        }
        if !self.port_bind.is_loopback() && self.api_key.as_deref().is_none_or(str::is_empty) {
            return Err(ConfigError::Invalid {
                key: "network.port_bind",
                reason: format!(
                    "exposing sandbox ports on {} needs an API key: anyone who can reach them \
                     reaches the sandboxes' servers",
                    self.port_bind
                ),
            });
        }
        if self.api_key.as_deref().is_some_and(|k| k.len() < 16) {
            return Err(ConfigError::Invalid {
                key: "server.api_key",
                reason: "must be at least 16 characters".into(),
            });
        }
        Ok(())
    }
}

/// Why settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config file {path}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("invalid {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error(
        "refusing to listen on {listen} without an API key: anyone who can reach it could run code; \
         set one with --api-key, FORGE_API_KEY or server.api_key, or listen on 127.0.0.1"
    )]
    OpenWithoutKey { listen: SocketAddr },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileConfig {
    server: FileServer,
    defaults: FileDefaults,
    pool: FilePool,
    images: FileImages,
    network: FileNetwork,
    /// The tool gateway's operator ceilings (the fields of a session policy).
    gateway: Option<forge_policy::Ceilings>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileNetwork {
    port_bind: Option<IpAddr>,
    hosts: Option<BTreeMap<String, Vec<IpAddr>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileImages {
    pull_missing: Option<bool>,
    platform: Option<String>,
    insecure: Option<Vec<String>>,
    mirrors: Option<std::collections::BTreeMap<String, Vec<String>>>,
    credentials: Option<std::collections::BTreeMap<String, forge_image::Credentials>>,
    max_upload_bytes: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileServer {
    listen: Option<String>,
    api_key: Option<String>,
    data_dir: Option<PathBuf>,
    max_body_bytes: Option<usize>,
    reaper_interval: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FileDefaults {
    image: Option<String>,
    memory_mb: Option<u64>,
    vcpus: Option<u64>,
    ttl: Option<String>,
    exec_timeout: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FilePool {
    max_sandboxes: Option<usize>,
    overflow: Option<Overflow>,
    queue_timeout: Option<String>,
    queue_depth: Option<usize>,
}

/// Values given on the command line (highest precedence).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<String>,
    pub api_key: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub max_sandboxes: Option<usize>,
}

/// Resolves settings from `file` (when given), the environment `env`, and `overrides`.
/// `env` is passed in (not read here) so that callers and tests decide what it holds.
pub fn load(
    file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    overrides: &Overrides,
    default_data_dir: PathBuf,
) -> Result<ServerConfig, ConfigError> {
    let parsed: FileConfig = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            toml::from_str(&text).map_err(|source| ConfigError::Parse {
                path: path.to_owned(),
                source,
            })?
        }
        None => FileConfig::default(),
    };
    let data_dir = overrides
        .data_dir
        .clone()
        .or_else(|| env(ENV_DATA_DIR).map(PathBuf::from))
        .or(parsed.server.data_dir)
        .unwrap_or(default_data_dir);
    let mut config = ServerConfig::new(data_dir);
    let listen = overrides
        .listen
        .clone()
        .or_else(|| env(ENV_LISTEN))
        .or(parsed.server.listen);
    if let Some(listen) = listen {
        config.listen = listen.parse().map_err(|_| ConfigError::Invalid {
            key: "server.listen",
            reason: format!("{listen:?} is not an address such as 127.0.0.1:7423"),
        })?;
    }
    config.api_key = overrides
        .api_key
        .clone()
        .or_else(|| env(ENV_API_KEY))
        .or(parsed.server.api_key)
        .filter(|k| !k.is_empty());
    if let Some(bytes) = parsed.server.max_body_bytes {
        config.max_body_bytes = bytes;
    }
    if let Some(interval) = parsed.server.reaper_interval {
        config.reaper_interval =
            duration("server.reaper_interval", &interval)?.max(Duration::from_millis(100));
    }
    if let Some(bind) = parsed.network.port_bind {
        config.port_bind = bind;
    }
    if let Some(hosts) = parsed.network.hosts {
        config.hosts = hosts;
    }
    let images = parsed.images;
    if let Some(pull) = images.pull_missing {
        config.registries.pull_missing = pull;
    }
    if let Some(platform) = images.platform {
        config.registries.platform = Some(platform);
    }
    if let Some(insecure) = images.insecure {
        config.registries.insecure = insecure;
    }
    if let Some(mirrors) = images.mirrors {
        config.registries.mirrors = mirrors;
    }
    if let Some(credentials) = images.credentials {
        config.registries.credentials = credentials;
    }
    if let Some(bytes) = images.max_upload_bytes {
        config.max_image_bytes = bytes;
    }
    if let Some(image) = parsed.defaults.image {
        config.default_image = image;
    }
    if let Some(memory) = parsed.defaults.memory_mb {
        config.default_memory_mb = memory;
    }
    if let Some(vcpus) = parsed.defaults.vcpus {
        config.default_vcpus = vcpus;
    }
    if let Some(ttl) = parsed.defaults.ttl {
        config.default_ttl = duration("defaults.ttl", &ttl)?;
    }
    if let Some(timeout) = parsed.defaults.exec_timeout {
        let timeout = duration("defaults.exec_timeout", &timeout)?;
        config.default_exec_timeout = (!timeout.is_zero()).then_some(timeout);
    }
    let max = match (
        overrides.max_sandboxes,
        env(ENV_MAX_SANDBOXES),
        parsed.pool.max_sandboxes,
    ) {
        (Some(max), _, _) | (None, None, Some(max)) => Some(max),
        (None, Some(text), _) => Some(text.parse().map_err(|_| ConfigError::Invalid {
            key: "pool.max_sandboxes",
            reason: format!("{text:?} (from {ENV_MAX_SANDBOXES}) is not a whole number"),
        })?),
        (None, None, None) => config.max_sandboxes,
    };
    config.max_sandboxes = max.filter(|m| *m > 0);
    if let Some(overflow) = parsed.pool.overflow {
        config.overflow = overflow;
    }
    if let Some(timeout) = parsed.pool.queue_timeout {
        config.queue_timeout = duration("pool.queue_timeout", &timeout)?;
    }
    if let Some(depth) = parsed.pool.queue_depth {
        config.queue_depth = depth;
    }
    if let Some(ceilings) = parsed.gateway {
        ceilings.validate().map_err(|error| ConfigError::Invalid {
            key: "gateway",
            reason: error.to_string(),
        })?;
        config.gateway_ceilings = ceilings;
    }
    config.check()?;
    Ok(config)
}

fn duration(key: &'static str, text: &str) -> Result<Duration, ConfigError> {
    parse_duration(text).map_err(|err| ConfigError::Invalid {
        key,
        reason: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn flags_beat_the_environment_which_beats_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("forge.toml");
        std::fs::write(
            &file,
            "[server]\nlisten = \"127.0.0.1:9000\"\ndata_dir = \"/from/file\"\n[pool]\nmax_sandboxes = 7\noverflow = \"queue\"\n",
        )
        .unwrap();
        let env = |name: &str| (name == ENV_DATA_DIR).then(|| "/from/env".to_owned());
        let overrides = Overrides {
            listen: Some("127.0.0.1:9100".into()),
            ..Overrides::default()
        };
        let config = load(Some(&file), &env, &overrides, "/default".into()).unwrap();
        assert_eq!(
            (
                config.listen.to_string(),
                config.data_dir,
                config.max_sandboxes,
                config.overflow
            ),
            (
                "127.0.0.1:9100".to_owned(),
                PathBuf::from("/from/env"),
                Some(7),
                Overflow::Queue
            )
        );
    }

    #[test]
    fn listening_beyond_loopback_needs_a_key() {
        let overrides = Overrides {
            listen: Some("0.0.0.0:7423".into()),
            ..Overrides::default()
        };
        let err = load(None, &no_env, &overrides, "/d".into()).unwrap_err();
        assert!(matches!(err, ConfigError::OpenWithoutKey { .. }), "{err}");
        let keyed = Overrides {
            api_key: Some("0123456789abcdef".into()),
            ..overrides
        };
        assert!(load(None, &no_env, &keyed, "/d".into()).is_ok());
    }

    #[test]
    fn bad_values_name_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("forge.toml");
        std::fs::write(&file, "[defaults]\nttl = \"forever\"\n").unwrap();
        let err = load(Some(&file), &no_env, &Overrides::default(), "/d".into()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid defaults.ttl: invalid number in \"forever\""
        );
        std::fs::write(&file, "[sever]\n").unwrap();
        let err = load(Some(&file), &no_env, &Overrides::default(), "/d".into()).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
    }
}
