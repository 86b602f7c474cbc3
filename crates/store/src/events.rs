//! The event stream: append-only, with ids that only grow, so a reader resumes from the last
//! id it saw.
//!
//! `SQLite` serialises writers, so an event's id is assigned and committed in one step and ids
//! become visible in order: a reader asking for "after n" never skips an event that commits
//! later with a smaller id. (A Postgres sequence does not give that; the Postgres port will
//! need a commit-ordered cursor.)

use crate::connections::insert_connection;
use crate::exec_log::insert_exec;
use crate::json::decode_optional;
use crate::{ConnectionRecord, EventRecord, NewEvent, NewExec, Store, StoreError};

/// One record of the server's journal: an event, a finished command or a connection attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum JournalEntry {
    Event(NewEvent),
    Exec(NewExec),
    Connection(ConnectionRecord),
}

/// An `events` row as stored: data still text.
#[derive(sqlx::FromRow)]
struct EventRow {
    id: i64,
    kind: String,
    sandbox_id: Option<String>,
    timestamp_ms: i64,
    data: Option<String>,
}

impl TryFrom<EventRow> for EventRecord {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<Self, StoreError> {
        Ok(EventRecord {
            data: decode_optional("event data", row.data.as_deref())?,
            id: row.id,
            kind: row.kind,
            sandbox_id: row.sandbox_id,
            timestamp_ms: row.timestamp_ms,
        })
    }
}

impl Store {
    /// Appends an event; returns it with its new id.
    pub async fn append_event(&self, e: &NewEvent) -> Result<EventRecord, StoreError> {
        insert_event(&self.pool, e).await
    }

    /// Writes events and exec log rows in one transaction, in the order given, and returns
    /// the stored events. A busy server queues a few records per request; committing them
    /// together costs one `SQLite` round trip and one WAL sync instead of one each. All or
    /// nothing: on an error no record of the batch is kept.
    pub async fn append_journal(
        &self,
        entries: &[JournalEntry],
    ) -> Result<Vec<EventRecord>, StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin a journal batch"))?;
        let mut events = Vec::new();
        for entry in entries {
            match entry {
                JournalEntry::Event(event) => events.push(insert_event(&mut *tx, event).await?),
                JournalEntry::Exec(exec) => {
                    insert_exec(&mut *tx, exec).await?;
                }
                JournalEntry::Connection(connection) => {
                    insert_connection(&mut *tx, connection).await?;
                }
            }
        }
        tx.commit()
            .await
            .map_err(StoreError::query("commit a journal batch"))?;
        Ok(events)
    }

    /// Up to `limit` events with ids above `after_id`, in id order. A `limit` of zero or less
    /// gives nothing.
    pub async fn events_after(
        &self,
        after_id: i64,
        limit: i64,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let rows: Vec<EventRow> = sqlx::query_as(
            "SELECT id, kind, sandbox_id, timestamp_ms, data FROM events \
             WHERE id > $1 ORDER BY id LIMIT $2",
        )
        .bind(after_id)
        // SQLite reads a negative LIMIT as "no limit"; Postgres rejects it.
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("read events"))?;
        rows.into_iter().map(EventRecord::try_from).collect()
    }

    /// The id of the newest event, 0 when there is none.
    pub async fn last_event_id(&self) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM events")
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::query("read last event id"))
    }
}

/// The `events` insert, on the pool or inside a batch's transaction.
async fn insert_event<'c, E>(executor: E, e: &NewEvent) -> Result<EventRecord, StoreError>
where
    E: sqlx::SqliteExecutor<'c>,
{
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO events (kind, sandbox_id, timestamp_ms, data) \
         VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(&e.kind)
    .bind(&e.sandbox_id)
    .bind(e.timestamp_ms)
    .bind(e.data.as_ref().map(serde_json::Value::to_string))
    .fetch_one(executor)
    .await
    .map_err(StoreError::query("append event"))?;
    Ok(EventRecord::new(id, e.clone()))
}
