//! The connection log: every outbound connection attempt of a sandbox, append-only.

use crate::{ConnectionRecord, Store, StoreError};

impl Store {
    /// Logs a connection attempt; returns its row id (the record's own `id` is ignored).
    pub async fn record_connection(&self, c: &ConnectionRecord) -> Result<i64, StoreError> {
        insert_connection(&self.pool, c).await
    }

    /// The last `limit` connection attempts of a sandbox, oldest first.
    pub async fn connections(
        &self,
        sandbox_id: &str,
        limit: i64,
    ) -> Result<Vec<ConnectionRecord>, StoreError> {
        sqlx::query_as(
            "SELECT id, sandbox_id, started_at_ms, kind, host, port, address, verdict, reason, \
             bytes_up, bytes_down, duration_ms FROM ( \
                 SELECT * FROM connection_log WHERE sandbox_id = $1 ORDER BY id DESC LIMIT $2 \
             ) AS recent ORDER BY id",
        )
        .bind(sandbox_id)
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("read connection log"))
    }
}

/// The `connection_log` insert, on the pool or inside a journal batch's transaction.
pub(crate) async fn insert_connection<'c, E>(
    executor: E,
    c: &ConnectionRecord,
) -> Result<i64, StoreError>
where
    E: sqlx::SqliteExecutor<'c>,
{
    sqlx::query_scalar(
        "INSERT INTO connection_log (sandbox_id, started_at_ms, kind, host, port, address, \
         verdict, reason, bytes_up, bytes_down, duration_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
    )
    .bind(&c.sandbox_id)
    .bind(c.started_at_ms)
    .bind(&c.kind)
    .bind(&c.host)
    .bind(c.port)
    .bind(&c.address)
    .bind(&c.verdict)
    .bind(&c.reason)
    .bind(c.bytes_up)
    .bind(c.bytes_down)
    .bind(c.duration_ms)
    .fetch_one(executor)
    .await
    .map_err(StoreError::query("record connection"))
}
