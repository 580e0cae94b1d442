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

mod batch_values;
#[cfg(test)]
mod broadcast;
mod checkpoint;
mod dialect;
mod jobs;
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
use sqlx::sqlite::{
    SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};

use super::error::{StoreError, StoreResult};

/// Connections to one SQLite file: every write goes through `writer`, pure reads through
/// `reader`.
#[derive(Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Reads of API calls and of the admin's urgent work (`writer_gate::goes_first`).
    first_reader: SqlitePool,
    /// API writes first on the one writer connection.
    gate: std::sync::Arc<super::writer_gate::WriterGate>,
    /// The database file, whose per-node lock files sit next to it (`store::liveness`); None
    /// for an in-memory database, which no other admin can share.
    pub(super) file: Option<std::path::PathBuf>,
    /// Checkpoints a file's WAL off the writer; None for an in-memory database.
    checkpointer: Option<checkpoint::Checkpointer>,
}

/// The size a checkpoint truncates the WAL file back to (`journal_size_limit`).
const WAL_SIZE_LIMIT_BYTES: u64 = 32 * 1024 * 1024;

/// Prepared statements the writer connection keeps.
const WRITER_STATEMENTS_CACHED: usize = 250;

/// Read connections per admin for the background loops and the trigger path.
const READ_CONNECTIONS: u32 = 4;
/// Read connections kept for API calls and the admin's urgent work (the registry refresh,
/// which health hangs on). Under twice the load an admin can take, the background loops' reads
/// held all four others and a `GetJob` waited minutes for one (issue 11).
const FIRST_READ_CONNECTIONS: u32 = 2;

/// A pool of `size` read-only connections.
async fn read_pool(size: u32, options: SqliteConnectOptions) -> StoreResult<SqlitePool> {
    SqlitePoolOptions::new()
        .max_connections(size)
        .min_connections(1)
        .before_acquire(|conn, _meta| {
            Box::pin(std::future::ready(Ok(super::pooled::reusable(conn))))
        })
        .connect_with(options)
        .await
        .map_err(StoreError::Unavailable)
}

impl SqliteStore {
    /// Opens (creating if missing) the database file and migrates it.
    pub async fn connect(url: &str) -> StoreResult<SqliteStore> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|error| StoreError::InvalidUrl(format!("{url}: {error}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(false)
            // SQLite keeps the WAL file at the largest size a checkpoint ever needed; with a
            // limit, each checkpoint that empties it truncates it back, so a burst does not
            // leave its peak on disk for good.
            .pragma("journal_size_limit", WAL_SIZE_LIMIT_BYTES.to_string());
        // A database created by this writer keeps pointer maps, so deleted rows' pages can be
        // handed back to the file system (`reclaim_space`). Applies to new files only: an
        // existing one keeps its mode until a `VACUUM` (docs/operations.md).
        let writer_options = options
            .clone()
            .auto_vacuum(SqliteAutoVacuum::Incremental)
            // A batched write inside a transaction keeps a statement journal (the pages it
            // changed, so it can be undone alone). Past 64 KiB SQLite spills that journal to a
            // temporary file; kept in memory, a 5 000-row claim makes no file writes for it.
            // Only the writer: the readers' large sorts keep spilling to disk.
            .pragma("temp_store", "memory")
            // Each batched write has a text per batch size (`batch_values`), 25 in all beside
            // the writer's other statements; sqlx's default cache holds 100, and a
            // statement evicted from it is compiled again on its next use.
            .statement_cache_capacity(WRITER_STATEMENTS_CACHED);
        let file = database_file(&options);
        // A file's WAL is checkpointed by a connection of its own (`checkpoint`); an in-memory
        // database has no WAL.
        let writer_options = match file {
            Some(_) => writer_options.pragma("wal_autocheckpoint", "0"),
            None => writer_options,
        };
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .before_acquire(|conn, _meta| {
                Box::pin(std::future::ready(Ok(super::pooled::reusable(conn))))
            })
            .connect_with(writer_options)
            .await
            .map_err(StoreError::Unavailable)?;
        sqlx::migrate!("migrations/sqlite")
            .run(&writer)
            .await
            .map_err(StoreError::Migrate)?;
        let checkpointer = match file {
            Some(_) => Some(checkpoint::Checkpointer::start(options.clone()).await?),
            None => None,
        };
        let options = options.read_only(true);
        let reader = read_pool(READ_CONNECTIONS, options.clone()).await?;
        let first_reader = read_pool(FIRST_READ_CONNECTIONS, options).await?;
        let store = SqliteStore {
            writer,
            reader,
            first_reader,
            gate: Default::default(),
            file,
            checkpointer,
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
            first_reader: Some(&self.first_reader),
        }
    }

    pub async fn close(&self) {
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.stop();
        }
        self.first_reader.close().await;
        self.reader.close().await;
        self.writer.close().await;
    }

    /// Returns up to `max_pages` free pages (left by deleted rows) to the file system, so the
    /// file shrinks; answers how many it freed. One short write per call, so a caller frees a
    /// large clean-up in steps without holding the writer. A file created without incremental
    /// auto-vacuum frees nothing (its free pages are reused for new rows).
    pub async fn reclaim_space(&self, max_pages: i64) -> StoreResult<i64> {
        let before = self.free_pages().await?;
        // A number we computed, not input: safe to splice into the pragma.
        sqlx::query(&format!("PRAGMA incremental_vacuum({})", max_pages.max(1)))
            .execute(&self.writer)
            .await
            .map_err(map_error)?;
        Ok(before - self.free_pages().await?)
    }

    /// Moves the run id sequence so the next run's id is above `past` (never lowers it).
    pub async fn raise_log_ids_past(&self, past: i64) -> StoreResult<()> {
        let mut tx = self.writer.begin().await.map_err(map_error)?;
        sqlx::query("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'xjob_log'")
            .bind(past)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        // No row before the table's first insert: the sequence starts from it.
        sqlx::query(
            "INSERT INTO sqlite_sequence (name, seq) SELECT 'xjob_log', ? \
             WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'xjob_log')",
        )
        .bind(past)
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
        tx.commit().await.map_err(map_error)
    }

    /// Rows of the log and the pages of the file in use (see [`super::log_storage::LogStorage`]).
    pub async fn log_storage(&self) -> StoreResult<super::log_storage::LogStorage> {
        let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM xjob_log")
            .fetch_one(&self.reader)
            .await
            .map_err(map_error)?;
        let (pages,): (i64,) = sqlx::query_as("PRAGMA page_count")
            .fetch_one(&self.writer)
            .await
            .map_err(map_error)?;
        let (page_size,): (i64,) = sqlx::query_as("PRAGMA page_size")
            .fetch_one(&self.writer)
            .await
            .map_err(map_error)?;
        let free = self.free_pages().await?;
        Ok(super::log_storage::LogStorage {
            rows,
            bytes: (pages - free) * page_size,
        })
    }

    async fn free_pages(&self) -> StoreResult<i64> {
        let (free,): (i64,) = sqlx::query_as("PRAGMA freelist_count")
            .fetch_one(&self.writer)
            .await
            .map_err(map_error)?;
        Ok(free)
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

/// The file behind `options`, None for an in-memory database.
fn database_file(options: &SqliteConnectOptions) -> Option<std::path::PathBuf> {
    let path = options.get_filename();
    let text = path.to_string_lossy();
    (!text.is_empty() && !text.contains(":memory:") && !text.starts_with("file:"))
        .then(|| path.to_path_buf())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GroupId, JobId};
    use crate::model::{NewRun, RunStatus, TriggerType};
    use crate::store::{LogCleanup, Store};

    fn skipped_run(second: i64) -> NewRun {
        NewRun {
            job_id: JobId(1),
            group_id: GroupId(1),
            fire_key: Some(NewRun::fire_key(JobId(1), second * 1000, 0, 0)),
            status: RunStatus::Skipped,
            trigger_type: TriggerType::Cron,
            scheduled_at_ms: second * 1000,
            handler: "h".into(),
            params: "p".repeat(400),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trigger_msg: "misfire: a reason of ordinary length for the test".into(),
            owner_node: "n1".into(),
            epoch: 1,
            dispatch_at_ms: 0,
            trace_id: String::new(),
        }
    }

    /// A new database file `name` in `dir`.
    async fn open_in(dir: &tempfile::TempDir, name: &str) -> SqliteStore {
        let path = dir.path().join(name);
        SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("store opens")
    }

    async fn pages(store: &SqliteStore) -> i64 {
        let (pages,): (i64,) = sqlx::query_as("PRAGMA page_count")
            .fetch_one(&store.writer)
            .await
            .expect("page count");
        pages
    }

    /// Copies the whole WAL into the database file (which truncates the file to its pages).
    /// The store's own checkpointer may be mid-checkpoint, and then this one reports busy and
    /// copies nothing: it is tried again until it completes.
    async fn checkpoint_whole_wal(store: &SqliteStore) {
        for _ in 0..200 {
            let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
                .fetch_one(&store.writer)
                .await
                .expect("checkpoint");
            if busy == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the WAL checkpoint stayed busy for 2 s");
    }

    /// An API call's read does not queue behind the background loops' reads: with every
    /// background read connection held, a read inside `api_call` still gets a connection,
    /// and a background read waits.
    #[tokio::test]
    async fn api_reads_have_connections_of_their_own() {
        let dir = tempfile::tempdir().expect("temp dir");
        let sqlite = open_in(&dir, "first.db").await;
        let mut held = Vec::new();
        for _ in 0..READ_CONNECTIONS {
            held.push(
                sqlite
                    .pools()
                    .read()
                    .await
                    .expect("background read connection"),
            );
        }
        let wait = std::time::Duration::from_millis(500);
        let background = tokio::time::timeout(wait, sqlite.pools().read()).await;
        assert!(
            background.is_err(),
            "a fifth background read got a connection"
        );
        let api = tokio::time::timeout(
            wait,
            crate::store::writer_gate::api_call(async {
                let mut conn = sqlite.pools().read().await?;
                let (one,): (i64,) = sqlx::query_as("SELECT 1")
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(StoreError::Unavailable)?;
                Ok::<i64, StoreError>(one)
            }),
        )
        .await;
        assert!(
            matches!(api, Ok(Ok(1))),
            "the API read waited for a background one: {api:?}"
        );
        drop(held);
        sqlite.close().await;
    }

    /// A new database is created with incremental auto-vacuum, so the pages of deleted runs go
    /// back to the file system: the file shrinks to a fraction once they are reclaimed.
    #[tokio::test]
    async fn deleted_runs_give_their_space_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let sqlite = open_in(&dir, "vacuum.db").await;
        let store = Store::Sqlite(sqlite.clone());
        let empty = pages(&sqlite).await;
        for chunk in 0..20 {
            let runs: Vec<NewRun> = (0..1_000).map(|i| skipped_run(chunk * 1_000 + i)).collect();
            store.insert_runs(&runs).await.expect("inserted");
        }
        let full = pages(&sqlite).await;
        let cleanup = LogCleanup::default();
        while store
            .delete_logs_batch(&cleanup, 1_000)
            .await
            .expect("deleted")
            > 0
        {}
        let mut freed = 0;
        loop {
            let step = store.reclaim_space(1_000).await.expect("reclaimed");
            freed += step;
            if step < 1_000 {
                break;
            }
        }
        let after = pages(&sqlite).await;
        checkpoint_whole_wal(&sqlite).await;
        let file_bytes = std::fs::metadata(dir.path().join("vacuum.db"))
            .expect("file")
            .len();
        eprintln!(
            "20 000 runs: {full} pages (empty: {empty}); deleted and reclaimed {freed} pages: \
             {after} pages, file {file_bytes} bytes"
        );
        assert!(
            freed > 0 && after * 4 < full,
            "{after} of {full} pages left"
        );
        assert!(
            file_bytes < (full * 4096 / 4) as u64,
            "{file_bytes} bytes left"
        );
        store.close().await;
    }
}
