//! The tool gateway's tables: its sessions (closed, never deleted) and the ledger of every
//! tool call (inserted, never updated).

use serde::{Deserialize, Serialize};

use crate::json::decode;
use crate::{Store, StoreError};

/// A gateway session: which sandbox it works in and under which policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewaySessionRecord {
    pub id: String,
    pub sandbox_id: String,
    /// Whether closing the session destroys the sandbox (it created it, rather than
    /// attaching to an existing one).
    pub owns_sandbox: bool,
    /// The effective policy, as JSON.
    pub policy: serde_json::Value,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub closed_at_ms: Option<i64>,
    pub close_reason: Option<String>,
}

/// One tool call as the ledger keeps it. Decisions and outcomes are the gateway's words,
/// stored as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRecord {
    /// Position in the hash-chained JSONL file, from 1.
    pub seq: i64,
    pub ts_ms: i64,
    pub session_id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub decision: Option<String>,
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub outcome: String,
    pub summary: serde_json::Value,
    pub duration_us: i64,
    pub idempotency_key: Option<String>,
    /// The whole reply, returned again when the idempotency key is repeated.
    pub reply: serde_json::Value,
    /// sha256 of the record's JSONL line.
    pub hash: String,
}

#[derive(sqlx::FromRow)]
struct SessionRow {
    id: String,
    sandbox_id: String,
    owns_sandbox: bool,
    policy: String,
    created_at_ms: i64,
    expires_at_ms: i64,
    closed_at_ms: Option<i64>,
    close_reason: Option<String>,
}

impl TryFrom<SessionRow> for GatewaySessionRecord {
    type Error = StoreError;

    fn try_from(row: SessionRow) -> Result<Self, StoreError> {
        Ok(Self {
            policy: decode("session policy", &row.policy)?,
            id: row.id,
            sandbox_id: row.sandbox_id,
            owns_sandbox: row.owns_sandbox,
            created_at_ms: row.created_at_ms,
            expires_at_ms: row.expires_at_ms,
            closed_at_ms: row.closed_at_ms,
            close_reason: row.close_reason,
        })
    }
}

#[derive(sqlx::FromRow)]
struct LedgerRow {
    seq: i64,
    ts_ms: i64,
    session_id: String,
    tool: String,
    arguments: String,
    decision: Option<String>,
    rule: Option<String>,
    reason: Option<String>,
    outcome: String,
    summary: String,
    duration_us: i64,
    idempotency_key: Option<String>,
    reply: String,
    hash: String,
}

impl TryFrom<LedgerRow> for LedgerRecord {
    type Error = StoreError;

    fn try_from(row: LedgerRow) -> Result<Self, StoreError> {
        Ok(Self {
            arguments: decode("ledger arguments", &row.arguments)?,
            summary: decode("ledger summary", &row.summary)?,
            reply: decode("ledger reply", &row.reply)?,
            seq: row.seq,
            ts_ms: row.ts_ms,
            session_id: row.session_id,
            tool: row.tool,
            decision: row.decision,
            rule: row.rule,
            reason: row.reason,
            outcome: row.outcome,
            duration_us: row.duration_us,
            idempotency_key: row.idempotency_key,
            hash: row.hash,
        })
    }
}

/// The ledger's columns, as a literal so queries stay static strings.
macro_rules! ledger_columns {
    () => {
        "seq, ts_ms, session_id, tool, arguments, decision, rule, reason, outcome, summary, \
         duration_us, idempotency_key, reply, hash"
    };
}

impl Store {
    /// Inserts a new gateway session; [`StoreError::Conflict`] if its id is taken.
    pub async fn insert_gateway_session(
        &self,
        record: &GatewaySessionRecord,
    ) -> Result<(), StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO gateway_sessions (id, sandbox_id, owns_sandbox, policy, created_at_ms, \
             expires_at_ms, closed_at_ms, close_reason) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&record.id)
        .bind(&record.sandbox_id)
        .bind(record.owns_sandbox)
        .bind(record.policy.to_string())
        .bind(record.created_at_ms)
        .bind(record.expires_at_ms)
        .bind(record.closed_at_ms)
        .bind(&record.close_reason)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("insert gateway session"))?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Conflict {
                what: "gateway session",
                key: record.id.clone(),
            });
        }
        Ok(())
    }

    /// A gateway session by id, open or closed.
    pub async fn gateway_session(
        &self,
        id: &str,
    ) -> Result<Option<GatewaySessionRecord>, StoreError> {
        sqlx::query_as::<_, SessionRow>("SELECT * FROM gateway_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::query("get gateway session"))?
            .map(TryInto::try_into)
            .transpose()
    }

    /// Sessions not closed yet, oldest first.
    pub async fn open_gateway_sessions(&self) -> Result<Vec<GatewaySessionRecord>, StoreError> {
        sqlx::query_as::<_, SessionRow>(
            "SELECT * FROM gateway_sessions WHERE closed_at_ms IS NULL ORDER BY created_at_ms, id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("list open gateway sessions"))?
        .into_iter()
        .map(TryInto::try_into)
        .collect()
    }

    /// Marks a session closed; returns whether it was open.
    pub async fn close_gateway_session(
        &self,
        id: &str,
        at_ms: i64,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let updated = sqlx::query(
            "UPDATE gateway_sessions SET closed_at_ms = $2, close_reason = $3 \
             WHERE id = $1 AND closed_at_ms IS NULL",
        )
        .bind(id)
        .bind(at_ms)
        .bind(reason)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("close gateway session"))?;
        Ok(updated.rows_affected() == 1)
    }

    /// Appends a ledger record. Its `seq` comes from the JSONL file, which is the order of
    /// record; a repeated `seq` is a [`StoreError::Conflict`].
    pub async fn insert_ledger(&self, record: &LedgerRecord) -> Result<(), StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO gateway_ledger (seq, ts_ms, session_id, tool, arguments, decision, rule, \
             reason, outcome, summary, duration_us, idempotency_key, reply, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
             ON CONFLICT DO NOTHING",
        )
        .bind(record.seq)
        .bind(record.ts_ms)
        .bind(&record.session_id)
        .bind(&record.tool)
        .bind(record.arguments.to_string())
        .bind(&record.decision)
        .bind(&record.rule)
        .bind(&record.reason)
        .bind(&record.outcome)
        .bind(record.summary.to_string())
        .bind(record.duration_us)
        .bind(&record.idempotency_key)
        .bind(record.reply.to_string())
        .bind(&record.hash)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("insert ledger record"))?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Conflict {
                what: "ledger record",
                key: record.seq.to_string(),
            });
        }
        Ok(())
    }

    /// The last `limit` ledger records, of one session or of all, oldest first.
    pub async fn ledger(
        &self,
        session_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<LedgerRecord>, StoreError> {
        let query = concat!(
            "SELECT ",
            ledger_columns!(),
            " FROM gateway_ledger WHERE ($1 IS NULL OR session_id = $1) ORDER BY seq DESC LIMIT $2"
        );
        let mut records = sqlx::query_as::<_, LedgerRow>(query)
            .bind(session_id)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("read the ledger"))?
            .into_iter()
            .map(TryInto::try_into)
            .collect::<Result<Vec<LedgerRecord>, StoreError>>()?;
        records.reverse();
        Ok(records)
    }

    /// The record of an earlier call of `session_id` with the same idempotency key.
    pub async fn ledger_by_key(
        &self,
        session_id: &str,
        key: &str,
    ) -> Result<Option<LedgerRecord>, StoreError> {
        let query = concat!(
            "SELECT ",
            ledger_columns!(),
            " FROM gateway_ledger WHERE session_id = $1 AND idempotency_key = $2"
        );
        sqlx::query_as::<_, LedgerRow>(query)
            .bind(session_id)
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::query("find an idempotent call"))?
            .map(TryInto::try_into)
            .transpose()
    }

    /// Calls recorded for a session: what its budget has used.
    pub async fn ledger_count(&self, session_id: &str) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT COUNT(*) FROM gateway_ledger WHERE session_id = $1")
            .bind(session_id)
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::query("count ledger records"))
    }
}
