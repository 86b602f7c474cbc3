//! The sandboxes table: one row per sandbox ever created. Destroying a sandbox marks its row
//! (state, time, reason) rather than deleting it.

use crate::json::{decode, encode_map};
use crate::{SandboxCounts, SandboxRecord, Store, StoreError};

/// A `sandboxes` row as stored: JSON columns still text.
#[derive(sqlx::FromRow)]
struct SandboxRow {
    id: String,
    state: String,
    image: String,
    provider: String,
    memory_mb: i64,
    vcpus: i64,
    owner_id: Option<String>,
    metadata: String,
    spec: String,
    template: Option<String>,
    created_at_ms: i64,
    expires_at_ms: i64,
    destroyed_at_ms: Option<i64>,
    destroy_reason: Option<String>,
    init_pid: Option<i64>,
}

impl TryFrom<SandboxRow> for SandboxRecord {
    type Error = StoreError;

    fn try_from(row: SandboxRow) -> Result<Self, StoreError> {
        Ok(SandboxRecord {
            metadata: decode("sandbox metadata", &row.metadata)?,
            spec: decode("sandbox spec", &row.spec)?,
            id: row.id,
            state: row.state,
            image: row.image,
            provider: row.provider,
            memory_mb: row.memory_mb,
            vcpus: row.vcpus,
            owner_id: row.owner_id,
            template: row.template,
            created_at_ms: row.created_at_ms,
            expires_at_ms: row.expires_at_ms,
            destroyed_at_ms: row.destroyed_at_ms,
            destroy_reason: row.destroy_reason,
            init_pid: row.init_pid,
        })
    }
}

impl Store {
    /// Inserts a new sandbox; [`StoreError::Conflict`] if its id is taken.
    pub async fn insert_sandbox(&self, record: &SandboxRecord) -> Result<(), StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO sandboxes (id, state, image, provider, memory_mb, vcpus, owner_id, \
             metadata, spec, template, created_at_ms, expires_at_ms, destroyed_at_ms, \
             destroy_reason, init_pid) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&record.id)
        .bind(&record.state)
        .bind(&record.image)
        .bind(&record.provider)
        .bind(record.memory_mb)
        .bind(record.vcpus)
        .bind(&record.owner_id)
        .bind(encode_map(&record.metadata))
        .bind(record.spec.to_string())
        .bind(&record.template)
        .bind(record.created_at_ms)
        .bind(record.expires_at_ms)
        .bind(record.destroyed_at_ms)
        .bind(&record.destroy_reason)
        .bind(record.init_pid)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("insert sandbox"))?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Conflict {
                what: "sandbox",
                key: record.id.clone(),
            });
        }
        Ok(())
    }

    /// The sandbox with this id, destroyed or not.
    pub async fn get_sandbox(&self, id: &str) -> Result<Option<SandboxRecord>, StoreError> {
        let row: Option<SandboxRow> = sqlx::query_as(
            "SELECT id, state, image, provider, memory_mb, vcpus, owner_id, metadata, spec, \
             template, created_at_ms, expires_at_ms, destroyed_at_ms, destroy_reason, init_pid \
             FROM sandboxes WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("read sandbox"))?;
        row.map(SandboxRecord::try_from).transpose()
    }

    /// Every sandbox (destroyed ones only if asked), newest first; equal creation times are
    /// ordered by id.
    pub async fn list_sandboxes(
        &self,
        include_destroyed: bool,
    ) -> Result<Vec<SandboxRecord>, StoreError> {
        let rows: Vec<SandboxRow> = sqlx::query_as(
            "SELECT id, state, image, provider, memory_mb, vcpus, owner_id, metadata, spec, \
             template, created_at_ms, expires_at_ms, destroyed_at_ms, destroy_reason, init_pid \
             FROM sandboxes WHERE $1 OR state <> 'destroyed' \
             ORDER BY created_at_ms DESC, id",
        )
        .bind(include_destroyed)
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("list sandboxes"))?;
        rows.into_iter().map(SandboxRecord::try_from).collect()
    }

    /// Moves a live sandbox's expiry; `false` if no live sandbox has this id.
    pub async fn set_expiry(&self, id: &str, expires_at_ms: i64) -> Result<bool, StoreError> {
        let updated = sqlx::query(
            "UPDATE sandboxes SET expires_at_ms = $2 WHERE id = $1 AND state <> 'destroyed'",
        )
        .bind(id)
        .bind(expires_at_ms)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("set sandbox expiry"))?;
        Ok(updated.rows_affected() > 0)
    }

    /// Records (or clears) the host pid of a sandbox's init, whatever its state; `false` if
    /// the id is unknown.
    pub async fn set_init_pid(&self, id: &str, pid: Option<i64>) -> Result<bool, StoreError> {
        let updated = sqlx::query("UPDATE sandboxes SET init_pid = $2 WHERE id = $1")
            .bind(id)
            .bind(pid)
            .execute(&self.pool)
            .await
            .map_err(StoreError::query("set sandbox init pid"))?;
        Ok(updated.rows_affected() > 0)
    }

    /// Marks a sandbox destroyed at `at_ms` for `reason`; `false` if the id is unknown or the
    /// sandbox was already destroyed (the first destruction's time and reason stay).
    pub async fn mark_destroyed(
        &self,
        id: &str,
        at_ms: i64,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let updated = sqlx::query(
            "UPDATE sandboxes SET state = 'destroyed', destroyed_at_ms = $2, destroy_reason = $3 \
             WHERE id = $1 AND state <> 'destroyed'",
        )
        .bind(id)
        .bind(at_ms)
        .bind(reason)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("mark sandbox destroyed"))?;
        Ok(updated.rows_affected() > 0)
    }

    /// Ids of live sandboxes whose expiry is at or before `now_ms`, the longest expired first
    /// (ties by id).
    pub async fn expired_sandboxes(&self, now_ms: i64) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(
            "SELECT id FROM sandboxes WHERE state <> 'destroyed' AND expires_at_ms <= $1 \
             ORDER BY expires_at_ms, id",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("list expired sandboxes"))
    }

    /// How many sandboxes are live, and how many rows there are in all.
    pub async fn sandbox_counts(&self) -> Result<SandboxCounts, StoreError> {
        let (active, total): (i64, i64) = sqlx::query_as(
            "SELECT COALESCE(SUM(CASE WHEN state <> 'destroyed' THEN 1 ELSE 0 END), 0), \
             COUNT(*) FROM sandboxes",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(StoreError::query("count sandboxes"))?;
        Ok(SandboxCounts { active, total })
    }
}
