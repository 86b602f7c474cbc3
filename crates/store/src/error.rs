//! The one error type of the store.

use std::path::PathBuf;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be created or opened.
    #[error("cannot open database {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },
    /// The embedded migrations could not be applied (or the database was migrated by a newer
    /// Forge).
    #[error("cannot migrate the database schema")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// A query failed; `what` names the operation ("insert sandbox").
    #[error("cannot {what}")]
    Query {
        what: &'static str,
        #[source]
        source: sqlx::Error,
    },
    /// A row with the same key already exists; `what` names the kind of row ("sandbox").
    #[error("{what} {key:?} already exists")]
    Conflict { what: &'static str, key: String },
    /// A JSON column holds text that does not decode to its Rust type.
    #[error("stored {what} is not valid JSON")]
    Decode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl StoreError {
    /// Wraps a failed query; meant for `map_err(StoreError::query("list sandboxes"))`.
    pub(crate) fn query(what: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| StoreError::Query { what, source }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn messages_name_the_failure_and_keep_the_cause_apart() {
        let open = StoreError::Open {
            path: PathBuf::from("/var/lib/forge/forge.db"),
            source: sqlx::Error::PoolClosed,
        };
        let conflict = StoreError::Conflict {
            what: "sandbox",
            key: "sb-1".to_owned(),
        };
        let query = StoreError::query("list sandboxes")(sqlx::Error::PoolClosed);
        let messages = [open.to_string(), conflict.to_string(), query.to_string()];
        assert_eq!(
            messages,
            [
                "cannot open database /var/lib/forge/forge.db".to_owned(),
                "sandbox \"sb-1\" already exists".to_owned(),
                "cannot list sandboxes".to_owned(),
            ]
        );
        assert!(std::error::Error::source(&query).is_some());
    }
}
