//! Sessions: what a client asks for, what it gets, and the live state the gateway keeps per
//! session (its call count and the secret values it has seen).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use forge_policy::{Network, Policy};
use forge_store::GatewaySessionRecord;
use forge_types::{Limits, NetworkMode, SandboxId, SandboxSpec, SessionId};
use serde::{Deserialize, Serialize};

use crate::GatewayError;

/// What a client asks for when it opens a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionRequest {
    /// The policy it wants; the default policy when absent. Narrowed by the operator's
    /// ceilings either way.
    pub policy: Option<Policy>,
    /// An existing sandbox to work in instead of a new one. The session does not own it:
    /// closing the session leaves it running.
    pub sandbox_id: Option<SandboxId>,
}

/// A session as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: SessionId,
    pub sandbox_id: SandboxId,
    /// Whether closing the session destroys its sandbox.
    pub owns_sandbox: bool,
    /// The effective policy: the request narrowed by the ceilings.
    pub policy: Policy,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// Tool calls made so far (every outcome counts against the budget).
    pub calls: u64,
    /// `open` or `closed`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_reason: Option<String>,
}

/// A session the gateway serves right now.
#[derive(Debug)]
pub(crate) struct Live {
    pub(crate) id: SessionId,
    pub(crate) sandbox_id: SandboxId,
    pub(crate) owns_sandbox: bool,
    pub(crate) policy: Policy,
    pub(crate) created_at_ms: i64,
    pub(crate) expires_at_ms: i64,
    pub(crate) calls: AtomicU64,
    /// Values this session handed the gateway as secrets (`write_env_file`), redacted from
    /// every later output and ledger line. Kept in memory only, never stored.
    pub(crate) secrets: Mutex<Vec<String>>,
}

impl Live {
    pub(crate) fn from_record(
        record: &GatewaySessionRecord,
        calls: u64,
    ) -> Result<Self, GatewayError> {
        let policy: Policy = serde_json::from_value(record.policy.clone()).map_err(|source| {
            GatewayError::Store(forge_store::StoreError::Decode {
                what: "session policy",
                source,
            })
        })?;
        let id = SessionId::parse(&record.id).ok_or_else(|| GatewayError::SessionNotFound {
            id: record.id.clone(),
        })?;
        Ok(Self {
            id,
            sandbox_id: SandboxId::parse(&record.sandbox_id).ok_or_else(|| {
                GatewayError::SessionNotFound {
                    id: record.id.clone(),
                }
            })?,
            owns_sandbox: record.owns_sandbox,
            policy,
            created_at_ms: record.created_at_ms,
            expires_at_ms: record.expires_at_ms,
            calls: AtomicU64::new(calls),
            secrets: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn record(&self) -> GatewaySessionRecord {
        GatewaySessionRecord {
            id: self.id.to_string(),
            sandbox_id: self.sandbox_id.as_str().to_owned(),
            owns_sandbox: self.owns_sandbox,
            policy: serde_json::to_value(&self.policy).unwrap_or_default(),
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms,
            closed_at_ms: None,
            close_reason: None,
        }
    }

    pub(crate) fn info(&self) -> SessionInfo {
        SessionInfo {
            id: self.id.clone(),
            sandbox_id: self.sandbox_id.clone(),
            owns_sandbox: self.owns_sandbox,
            policy: self.policy.clone(),
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms,
            calls: self.calls.load(Ordering::SeqCst),
            state: "open".to_owned(),
            close_reason: None,
        }
    }

    pub(crate) fn secrets(&self) -> Vec<String> {
        self.secrets
            .lock()
            .map(|secrets| secrets.clone())
            .unwrap_or_default()
    }

    pub(crate) fn add_secrets(&self, values: impl IntoIterator<Item = String>) {
        if let Ok(mut secrets) = self.secrets.lock() {
            for value in values {
                if !secrets.contains(&value) {
                    secrets.push(value);
                }
            }
        }
    }
}

/// The sandbox a policy calls for: its memory and its network.
pub(crate) fn sandbox_spec(policy: &Policy, image: &str, session: &SessionId) -> SandboxSpec {
    let (network, allowed_hosts) = match &policy.network {
        Network::None => (NetworkMode::None, Vec::new()),
        Network::Open => (NetworkMode::Open, Vec::new()),
        Network::Allowlist { hosts } => (
            NetworkMode::Allowlist,
            hosts.iter().map(|host| host.as_str().to_owned()).collect(),
        ),
    };
    SandboxSpec {
        image: image.to_owned(),
        limits: Limits {
            memory_bytes: policy.max_memory_mb.saturating_mul(1 << 20),
            ..Limits::default()
        },
        network,
        allowed_hosts,
        labels: [("forge.session".to_owned(), session.to_string())].into(),
        ..SandboxSpec::default()
    }
}
