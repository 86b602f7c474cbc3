//! Forge's persistent state: sandboxes, templates, the exec log, the event stream, and the tool
//! gateway's sessions and ledger, kept in `SQLite` through sqlx.
//!
//! One [`Store`] wraps a connection pool. The schema lives in `migrations/`, is embedded in the
//! binary and is brought up to date by [`Store::open`]. Queries are plain runtime SQL with
//! `$n` binds (no compile-time checked macros, so building needs no database), written to run
//! unchanged on Postgres where that costs nothing: timestamps are milliseconds since the Unix
//! epoch in BIGINT columns and JSON is stored as TEXT.
//!
//! Durability: the database runs in WAL mode with `synchronous = NORMAL`, so a committed write
//! survives the process being killed (it is in the WAL); only a power loss may drop the last
//! transactions.

mod error;
mod events;
mod exec_log;
mod gateway;
mod json;
mod records;
mod sandboxes;
mod templates;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

pub use error::StoreError;
pub use gateway::{GatewaySessionRecord, LedgerRecord};
pub use records::{
    EventRecord, ExecRecord, NewEvent, NewExec, SandboxCounts, SandboxRecord, TemplateRecord,
};

/// The schema, embedded from `migrations/`.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// How long a connection waits for another writer's lock before it gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections in a file-backed pool. `SQLite` serialises writers anyway; the extra connections
/// let reads proceed while a write is in flight (WAL readers never block).
const MAX_CONNECTIONS: u32 = 8;

/// Forge's persistent state. Cheap to clone: clones share one connection pool.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    /// Opens (creating it and its parent directories if missing) the database at `path`,
    /// switches it to WAL and runs the pending migrations.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        let open_error = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            let dir = parent.to_path_buf();
            tokio::task::spawn_blocking(move || std::fs::create_dir_all(dir))
                .await
                .map_err(std::io::Error::other)
                .flatten()
                .map_err(|error| open_error(sqlx::Error::Io(error)))?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(open_error)?;
        Self::migrated(pool).await
    }

    /// Opens a fresh database that lives in memory, for tests. The pool holds exactly one
    /// connection that is never recycled, because each connection to `:memory:` is a database
    /// of its own and closing it loses the data.
    pub async fn open_in_memory() -> Result<Store, StoreError> {
        let options = SqliteConnectOptions::new()
            .in_memory(true)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open {
                path: PathBuf::from(":memory:"),
                source,
            })?;
        Self::migrated(pool).await
    }

    async fn migrated(pool: SqlitePool) -> Result<Store, StoreError> {
        if let Err(error) = MIGRATOR.run(&pool).await {
            pool.close().await;
            return Err(StoreError::Migrate(error));
        }
        Ok(Store { pool })
    }

    /// Closes every connection, waiting for queries in flight. The store (and its clones)
    /// cannot be used afterwards.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// The pragmas every connection of a file-backed store runs with.
    async fn pragmas(store: &Store) -> (String, i64, i64, i64) {
        let mut conn = store.pool.acquire().await.unwrap();
        let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let busy_timeout: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        (journal, synchronous, foreign_keys, busy_timeout)
    }

    #[tokio::test]
    async fn file_store_runs_wal_with_normal_sync_foreign_keys_and_busy_timeout() {
        let dir = forge_test_support::data_dir();
        let store = Store::open(&dir.path().join("forge.db")).await.unwrap();
        // journal_mode, synchronous = 1 (NORMAL), foreign_keys = 1, busy_timeout in ms
        assert_eq!(pragmas(&store).await, ("wal".to_owned(), 1, 1, 5000));
        store.close().await;
    }

    #[tokio::test]
    async fn a_database_migrated_by_a_newer_forge_is_refused() {
        let dir = forge_test_support::data_dir();
        let path = dir.path().join("forge.db");
        let store = Store::open(&path).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations \
             (version, description, success, checksum, execution_time) \
             VALUES (99999999, 'from the future', TRUE, x'00', 0)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        store.close().await;

        let error = Store::open(&path).await.unwrap_err();
        assert!(
            matches!(
                error,
                StoreError::Migrate(sqlx::migrate::MigrateError::VersionMissing(99_999_999))
            ),
            "{error:?}"
        );
    }
}
