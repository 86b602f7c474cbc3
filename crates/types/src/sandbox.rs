//! What a sandbox is asked to be ([`SandboxSpec`]), what it is ([`SandboxInfo`]) and what it
//! uses ([`SandboxStats`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A sandbox id: `sb-` and eight lowercase hex digits, the shape ForgeVM's clients expect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SandboxId(String);

impl SandboxId {
    /// Builds an id from four random bytes.
    pub fn from_random(bytes: [u8; 4]) -> Self {
        Self(format!("sb-{:08x}", u32::from_be_bytes(bytes)))
    }

    /// Accepts an id a client sent, refusing anything that could not have come from
    /// [`SandboxId::from_random`] (so an id can be used as a path component safely).
    pub fn parse(text: &str) -> Option<Self> {
        is_hex_id(text, "sb-", 8).then(|| Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `text` is `prefix` followed by exactly `digits` lowercase hex digits: the shape of
/// every random id Forge hands out, safe to use as a path component.
pub(crate) fn is_hex_id(text: &str, prefix: &str, digits: usize) -> bool {
    text.strip_prefix(prefix).is_some_and(|hex| {
        hex.len() == digits
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The image a sandbox's root file system is built from. `host` is the base assembled from
/// the host's own `/usr` and `/etc`, which needs no download.
pub const HOST_IMAGE: &str = "host";

/// Everything needed to create a sandbox. Defaults are safe: no network, bounded memory,
/// processes and CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSpec {
    /// Image name; [`HOST_IMAGE`] unless another image is installed.
    pub image: String,
    pub limits: Limits,
    pub network: NetworkMode,
    /// Destinations reachable in [`NetworkMode::Allowlist`]: host names (`pypi.org`,
    /// `*.example.org`), IP addresses or CIDRs, each optionally with `:port`. Ignored in the
    /// other modes.
    pub allowed_hosts: Vec<String>,
    /// A host directory to mount at `/workspace` instead of an empty one.
    pub workspace: Option<PathBuf>,
    /// Environment added to every process started in the sandbox.
    pub env: BTreeMap<String, String>,
    /// Free-form labels, kept with the sandbox and returned by listings.
    pub labels: BTreeMap<String, String>,
}

impl Default for SandboxSpec {
    fn default() -> Self {
        Self {
            image: HOST_IMAGE.to_owned(),
            limits: Limits::default(),
            network: NetworkMode::None,
            allowed_hosts: Vec::new(),
            workspace: None,
            env: BTreeMap::new(),
            labels: BTreeMap::new(),
        }
    }
}

/// Resource limits. Memory, processes and CPU are enforced by cgroups; the rest by rlimits
/// and mount options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Memory (including `/tmp`, which is memory-backed) in bytes.
    pub memory_bytes: u64,
    /// Maximum number of processes and threads.
    pub pids: u32,
    /// CPU quota in thousandths of a CPU (`1500` is one and a half CPUs).
    pub cpu_millis: u32,
    /// Maximum open files per process.
    pub open_files: u64,
    /// Largest file a process may write, in bytes.
    pub file_size_bytes: u64,
    /// Size of the memory-backed `/tmp`, in bytes.
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 512 << 20,
            pids: 256,
            cpu_millis: 1000,
            open_files: 4096,
            file_size_bytes: 1 << 30,
            tmp_bytes: 256 << 20,
        }
    }
}

/// How a sandbox reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// Its own network namespace with only loopback up.
    #[default]
    None,
    /// Out only through Forge's egress proxy, to listed destinations.
    Allowlist,
    /// Outbound access with the host's loopback and metadata addresses blocked.
    Open,
}

impl NetworkMode {
    pub const NAMES: [&str; 3] = ["none", "allowlist", "open"];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Allowlist => "allowlist",
            Self::Open => "open",
        }
    }
}

impl FromStr for NetworkMode {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "none" => Ok(Self::None),
            "allowlist" => Ok(Self::Allowlist),
            "open" => Ok(Self::Open),
            other => Err(SpecError::new(
                "network",
                format!("unknown network mode {other:?}; expected one of none, allowlist, open"),
            )),
        }
    }
}

impl fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A spec field that cannot be honoured, named the way the spec spells it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
pub struct SpecError {
    pub field: &'static str,
    pub reason: String,
}

impl SpecError {
    pub fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }
}

/// Smallest memory limit that still lets a shell start.
pub const MIN_MEMORY_BYTES: u64 = 4 << 20;

impl SandboxSpec {
    /// Checks what can be checked without the host: limits in range, a plausible image name,
    /// environment names a process can receive.
    pub fn validate(&self) -> Result<(), SpecError> {
        let limits = &self.limits;
        if limits.memory_bytes == 0 {
            return Err(SpecError::new(
                "limits.memory_bytes",
                "must be greater than zero",
            ));
        }
        if limits.memory_bytes < MIN_MEMORY_BYTES {
            return Err(SpecError::new(
                "limits.memory_bytes",
                format!("must be at least {MIN_MEMORY_BYTES} bytes (4 MiB)"),
            ));
        }
        if limits.pids == 0 {
            return Err(SpecError::new("limits.pids", "must be greater than zero"));
        }
        if limits.cpu_millis == 0 {
            return Err(SpecError::new(
                "limits.cpu_millis",
                "must be greater than zero",
            ));
        }
        if limits.open_files < 16 {
            return Err(SpecError::new("limits.open_files", "must be at least 16"));
        }
        if limits.file_size_bytes == 0 {
            return Err(SpecError::new(
                "limits.file_size_bytes",
                "must be greater than zero",
            ));
        }
        if limits.tmp_bytes == 0 {
            return Err(SpecError::new(
                "limits.tmp_bytes",
                "must be greater than zero",
            ));
        }
        if self.image.is_empty() {
            return Err(SpecError::new("image", "must not be empty"));
        }
        if self
            .image
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(SpecError::new(
                "image",
                format!("{:?} is not an image name", self.image),
            ));
        }
        if let Some(workspace) = &self.workspace
            && !workspace.is_absolute()
        {
            return Err(SpecError::new(
                "workspace",
                format!("{} must be an absolute path", workspace.display()),
            ));
        }
        for name in self.env.keys() {
            validate_env_name(name).map_err(|reason| SpecError::new("env", reason))?;
        }
        // The full grammar (names, wildcards, CIDRs, ports) is checked by the backend that
        // enforces the list; here only what no spelling of a destination can contain.
        if let Some(bad) = self.allowed_hosts.iter().find(|host| {
            host.is_empty() || host.chars().any(|c| c.is_control() || c.is_whitespace())
        }) {
            return Err(SpecError::new(
                "allowed_hosts",
                format!("{bad:?} is not a host, address or network"),
            ));
        }
        Ok(())
    }
}

/// An environment variable name must be non-empty and free of `=` and NUL.
pub fn validate_env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(format!("{name:?} is not a valid environment variable name"));
    }
    Ok(())
}

/// A live sandbox as the backend knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxInfo {
    pub id: SandboxId,
    pub spec: SandboxSpec,
    /// Host pid of the sandbox's init (its PID 1).
    pub init_pid: i32,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Limits the host could not enforce (for example cgroups that are not delegated).
    pub degraded: Vec<String>,
}

/// What a sandbox uses right now, read from its cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SandboxStats {
    pub memory_bytes: Option<u64>,
    pub memory_peak_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    pub cpu_usage_ns: Option<u64>,
    pub pids: Option<u64>,
    pub pids_limit: Option<u64>,
    pub oom_kills: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn ids_round_trip_and_refuse_paths() {
        let id = SandboxId::from_random([0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(id.as_str(), "sb-deadbeef");
        assert_eq!(SandboxId::parse("sb-deadbeef"), Some(id));
        for bad in [
            "sb-DEADBEEF",
            "sb-../../x",
            "sb-1234567",
            "xx-deadbeef",
            "sb-deadbeef0",
        ] {
            assert_eq!(SandboxId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn invalid_specs_name_the_field() {
        let cases: Vec<(SandboxSpec, &str)> = vec![
            (
                SandboxSpec {
                    limits: Limits {
                        memory_bytes: 0,
                        ..Limits::default()
                    },
                    ..SandboxSpec::default()
                },
                "limits.memory_bytes",
            ),
            (
                SandboxSpec {
                    limits: Limits {
                        pids: 0,
                        ..Limits::default()
                    },
                    ..SandboxSpec::default()
                },
                "limits.pids",
            ),
            (
                SandboxSpec {
                    limits: Limits {
                        cpu_millis: 0,
                        ..Limits::default()
                    },
                    ..SandboxSpec::default()
                },
                "limits.cpu_millis",
            ),
            (
                SandboxSpec {
                    image: String::new(),
                    ..SandboxSpec::default()
                },
                "image",
            ),
            (
                SandboxSpec {
                    workspace: Some("relative".into()),
                    ..SandboxSpec::default()
                },
                "workspace",
            ),
            (
                SandboxSpec {
                    env: [("A=B".to_owned(), String::new())].into(),
                    ..SandboxSpec::default()
                },
                "env",
            ),
            (
                SandboxSpec {
                    allowed_hosts: vec!["pypi.org".to_owned(), "a b".to_owned()],
                    ..SandboxSpec::default()
                },
                "allowed_hosts",
            ),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(spec, _)| spec.validate().map_err(|e| e.field))
            .collect();
        let want: Vec<_> = cases.iter().map(|(_, field)| Err(*field)).collect();
        assert_eq!(got, want);
        assert_eq!(SandboxSpec::default().validate(), Ok(()));
    }

    #[test]
    fn unknown_network_mode_is_named() {
        let err = "bridge".parse::<NetworkMode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid network: unknown network mode \"bridge\"; expected one of none, allowlist, open"
        );
        let spec: Result<SandboxSpec, _> = serde_json::from_str(r#"{"network":"bridge"}"#);
        assert!(
            spec.unwrap_err()
                .to_string()
                .contains("unknown variant `bridge`")
        );
    }
}
