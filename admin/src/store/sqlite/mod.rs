//! The embedded SQLite backend: one file under the data dir, WAL mode, migrations embedded.
//!
//! SQLite serializes writers, so `BEGIN IMMEDIATE` is the schedule lock; a busy timeout makes a
//! second writer wait instead of failing.
//!
//! Each admin writes through one connection and reads through a small pool. With several
//! writer connections in one process, every write but one waits in SQLite's busy handler, which
//! sleeps in growing steps (up to 100 ms) instead of waking when the lock frees; one writer
//! connection makes those writes queue in the pool and run back to back. Readers never block
//! on the writer in WAL mode. Busy waits remain only between processes sharing the file.

#[cfg(test)]
mod broadcast;
pub(super) mod jobs;
mod logs;
mod monitor;
#[cfg(test)]
mod plans;
#[cfg(test)]
mod report;
mod rows;

use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::{StoreError, StoreResult};

/// Connections to one SQLite file: every write goes through `writer`, pure reads through
/// `reader`.
#[derive(Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// API writes first on the one writer connection.
    gate: std::sync::Arc<super::writer_gate::WriterGate>,
}

/// Read connections per admin: the API, the registry refresh and the trigger path read at once.
const READ_CONNECTIONS: u32 = 4;

impl SqliteStore {
    /// Opens (creating if missing) the database file and migrates it.
    pub async fn connect(url: &str) -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|error| StoreError::InvalidUrl(format!("{url}: {error}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(false);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(options.clone())
            .await
            .map_err(StoreError::Unavailable)?;
        sqlx::migrate!("migrations/sqlite")
            .run(&writer)
            .await
            .map_err(StoreError::Migrate)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .min_connections(1)
            .connect_with(options.read_only(true))
            .await
            .map_err(StoreError::Unavailable)?;
        let store = SqliteStore {
            writer,
            reader,
            gate: Default::default(),
        };
        store.check_lock_row().await?;
        Ok(store)
    }

    /// Where the shared statements write and read.
    pub(super) fn pools(&self) -> super::sql::Pools<'_, sqlx::Sqlite> {
        super::sql::Pools {
            writer: &self.writer,
            reader: &self.reader,
            gate: Some(&self.gate),
        }
    }

    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    /// Refuses to run without the schedule lock row: without it admins would not exclude
    /// each other (XXL-JOB silently loses mutual exclusion in that case).
    async fn check_lock_row(&self) -> StoreResult<()> {
        let found: Option<(String,)> =
            sqlx::query_as("SELECT lock_name FROM xjob_lock WHERE lock_name = 'schedule_lock'")
                .fetch_optional(&self.writer)
                .await
                .map_err(map_error)?;
        match found {
            Some(_) => Ok(()),
            None => Err(StoreError::Schema(
                "row 'schedule_lock' missing from xjob_lock; re-run migrations or insert it"
                    .to_string(),
            )),
        }
    }
}

/// Maps a driver error to the store's error: unique violations become `Conflict`.
fn map_error(error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db_error) = &error
        && db_error.is_unique_violation()
    {
        return StoreError::Conflict(db_error.message().to_string());
    }
    StoreError::Unavailable(error)
}
