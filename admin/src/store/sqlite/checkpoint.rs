//! WAL checkpoints on a connection of their own, so the one writer connection never stops to
//! copy the WAL into the database file.
//!
//! SQLite's automatic checkpoint runs on the connection whose commit crossed 1 000 WAL pages: the
//! writer. At 5 000 fires/s that was 5 % of the admin's CPU, and a pause of the writer, with its
//! `fsync`s, each time a commit took the WAL past that size, while the claims of the next second
//! queued behind it. Here the writer has automatic checkpoints off and this task checkpoints every
//! [`PERIOD`]. A `PASSIVE` checkpoint runs beside the writer in WAL mode: it copies the frames
//! no reader still needs and never blocks a write.

use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::store::error::{StoreError, StoreResult};

/// How often the WAL is checkpointed. At 10 000 fires/s the WAL grows by a few MiB in this
/// time, about what SQLite's automatic checkpoint (1 000 pages) let it grow.
const PERIOD: Duration = Duration::from_millis(250);

/// The checkpoint task of one store; it stops when the last clone of the store is dropped or
/// closed.
#[derive(Clone)]
pub(super) struct Checkpointer {
    token: CancellationToken,
    _stop_when_dropped: Arc<DropGuard>,
}

impl Checkpointer {
    /// Opens the task's connection and starts checkpointing every [`PERIOD`].
    pub(super) async fn start(options: SqliteConnectOptions) -> StoreResult<Checkpointer> {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(options)
            .await
            .map_err(StoreError::Unavailable)?;
        let token = CancellationToken::new();
        tokio::spawn(checkpoint_until_stopped(pool, token.clone()));
        Ok(Checkpointer {
            _stop_when_dropped: Arc::new(token.clone().drop_guard()),
            token,
        })
    }

    pub(super) fn stop(&self) {
        self.token.cancel();
    }
}

async fn checkpoint_until_stopped(pool: SqlitePool, stop: CancellationToken) {
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(PERIOD) => {}
        }
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&pool)
            .await
        {
            Ok(_) => failing = false,
            // Logged once per outage: a full disk fails every checkpoint until space is freed,
            // and the writes themselves report it (health).
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(%error, "WAL checkpoint failed");
            }
            Err(_) => {}
        }
    }
    pool.close().await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::SqliteStore;

    /// The writer has automatic checkpoints off, and a commit past their threshold still
    /// reaches the database file: the task copied it there.
    #[tokio::test]
    async fn the_wal_is_checkpointed_off_the_writer() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("checkpoint.db");
        let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("store opens");
        let (pages_per_checkpoint,): (i64,) = sqlx::query_as("PRAGMA wal_autocheckpoint")
            .fetch_one(&store.writer)
            .await
            .expect("pragma");
        assert_eq!(pages_per_checkpoint, 0, "the writer checkpoints by itself");

        let file_len = || std::fs::metadata(&path).expect("database file").len();
        let before = file_len();
        // About 2 000 pages in one commit, twice SQLite's automatic threshold.
        sqlx::query("CREATE TABLE filler (b BLOB)")
            .execute(&store.writer)
            .await
            .expect("create");
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) \
             INSERT INTO filler SELECT randomblob(4000) FROM n",
        )
        .execute(&store.writer)
        .await
        .expect("fill");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while file_len() < before + 4_000_000 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the WAL was not copied into the database file within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        store.close().await;
    }
}
