//! The exec log: every command run in a sandbox, append-only.

use crate::{ExecRecord, NewExec, Store, StoreError};

/// An `exec_log` row; its columns need no decoding.
#[derive(sqlx::FromRow)]
struct ExecRow {
    id: i64,
    sandbox_id: String,
    command: String,
    exit_code: i64,
    signal: Option<i64>,
    duration_us: i64,
    started_at_ms: i64,
    timed_out: bool,
    oom_killed: bool,
    streamed: bool,
}

impl From<ExecRow> for ExecRecord {
    fn from(row: ExecRow) -> Self {
        ExecRecord {
            id: row.id,
            sandbox_id: row.sandbox_id,
            command: row.command,
            exit_code: row.exit_code,
            signal: row.signal,
            duration_us: row.duration_us,
            started_at_ms: row.started_at_ms,
            timed_out: row.timed_out,
            oom_killed: row.oom_killed,
            streamed: row.streamed,
        }
    }
}

impl Store {
    /// Logs a command; returns its row id.
    pub async fn record_exec(&self, e: &NewExec) -> Result<i64, StoreError> {
        insert_exec(&self.pool, e).await
    }

    /// The last `limit` commands logged for a sandbox, oldest first. A `limit` of zero or
    /// less gives nothing.
    pub async fn exec_log(
        &self,
        sandbox_id: &str,
        limit: i64,
    ) -> Result<Vec<ExecRecord>, StoreError> {
        let rows: Vec<ExecRow> = sqlx::query_as(
            "SELECT id, sandbox_id, command, exit_code, signal, duration_us, started_at_ms, \
             timed_out, oom_killed, streamed FROM ( \
                 SELECT * FROM exec_log WHERE sandbox_id = $1 ORDER BY id DESC LIMIT $2 \
             ) AS recent ORDER BY id",
        )
        .bind(sandbox_id)
        // SQLite reads a negative LIMIT as "no limit"; Postgres rejects it.
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("read exec log"))?;
        Ok(rows.into_iter().map(ExecRecord::from).collect())
    }
}

/// The `exec_log` insert, on the pool or inside a batch's transaction.
pub(crate) async fn insert_exec<'c, E>(executor: E, e: &NewExec) -> Result<i64, StoreError>
where
    E: sqlx::SqliteExecutor<'c>,
{
    sqlx::query_scalar(
        "INSERT INTO exec_log (sandbox_id, command, exit_code, signal, duration_us, \
         started_at_ms, timed_out, oom_killed, streamed) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(&e.sandbox_id)
    .bind(&e.command)
    .bind(e.exit_code)
    .bind(e.signal)
    .bind(e.duration_us)
    .bind(e.started_at_ms)
    .bind(e.timed_out)
    .bind(e.oom_killed)
    .bind(e.streamed)
    .fetch_one(executor)
    .await
    .map_err(StoreError::query("record exec"))
}
