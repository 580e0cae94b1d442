//! The PostgreSQL backend (15+): a connection pool, embedded migrations, and the schedule lock
//! as `SELECT … FOR UPDATE` on the `schedule_lock` row.
//!
//! SQLite has a single writer, and some of its statements are correct only because of that.
//! Here several admins write at once, so every place that relies on "nobody else writes
//! meanwhile" takes a row lock or is a conditional update that PostgreSQL re-checks on the
//! newest row version after waiting (READ COMMITTED): claims and adoptions are compare-and-set
//! on owner/epoch/status, multi-row claims lock their rows in id order (`FOR UPDATE`, or
//! `SKIP LOCKED` for work queues) so two admins never deadlock, and a follow-up that judges the
//! other runs of its fire first locks the job row (see `shared/followups.rs`).

mod dialect;
mod jobs;
mod logs;
mod monitor;
mod rows;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

use super::error::{StoreError, StoreResult};

/// Connections per admin: the schedule round, the ring's dispatch recorder, callbacks and the
/// monitors each hold one briefly.
const MAX_CONNECTIONS: u32 = 16;
/// How long a caller waits for a connection (this bounds connecting to an unreachable server).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// A transaction whose client goes quiet this long is ended by the server, releasing its row
/// locks: an admin frozen inside a schedule round (SIGSTOP, a long GC-like stall) must not hold
/// the schedule lock of every admin. Our transactions never wait on anything but the database.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "5s";

/// A pool of connections to one PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// For the liveness lock's own connection (`store::liveness`), which must not be pooled.
    pub(super) options: PgConnectOptions,
}

impl PgStore {
    /// Connects, migrates, and checks that the schedule lock row exists.
    pub async fn connect(url: &str) -> StoreResult<PgStore> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|error| StoreError::InvalidUrl(format!("postgres url: {error}")))?
            .application_name("xjob-admin")
            .options([(
                "idle_in_transaction_session_timeout",
                IDLE_IN_TRANSACTION_TIMEOUT,
            )]);
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .before_acquire(|conn, _meta| {
                Box::pin(std::future::ready(Ok(super::pooled::reusable(conn))))
            })
            .connect_with(options.clone())
            .await
            .map_err(StoreError::Unavailable)?;
        sqlx::migrate!("migrations/postgres")
            .run(&pool)
            .await
            .map_err(StoreError::Migrate)?;
        let store = PgStore { pool, options };
        store.check_lock_row().await?;
        Ok(store)
    }

    /// Where the shared statements write and read.
    pub(super) fn pools(&self) -> super::sql::Pools<'_, sqlx::Postgres> {
        super::sql::Pools {
            writer: &self.pool,
            reader: &self.pool,
            gate: None,
            first_reader: None,
        }
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Nothing to do (0 freed): the server reuses the space of deleted rows (PostgreSQL's
    /// autovacuum, InnoDB's free pages); shrinking files is an operator's decision.
    pub async fn reclaim_space(&self, _max_pages: i64) -> StoreResult<i64> {
        Ok(0)
    }

    /// Moves the run id sequence so the next run's id is above `past` (never lowers it).
    pub async fn raise_log_ids_past(&self, past: i64) -> StoreResult<()> {
        sqlx::query(
            "SELECT setval(pg_get_serial_sequence('xjob_log', 'id'), \
               GREATEST($1, (SELECT last_value FROM xjob_log_id_seq), 1))",
        )
        .bind(past)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(())
    }

    /// Rows of the log and the table's size with indexes (see [`super::log_storage::LogStorage`]).
    pub async fn log_storage(&self) -> StoreResult<super::log_storage::LogStorage> {
        let (rows, bytes): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM xjob_log), pg_total_relation_size('xjob_log')",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(super::log_storage::LogStorage { rows, bytes })
    }

    /// Refuses to run without the schedule lock row: without it admins would not exclude
    /// each other (XXL-JOB silently loses mutual exclusion in that case).
    async fn check_lock_row(&self) -> StoreResult<()> {
        let found: Option<String> =
            sqlx::query_scalar("SELECT lock_name FROM xjob_lock WHERE lock_name = 'schedule_lock'")
                .fetch_optional(&self.pool)
                .await
                .map_err(map_error)?;
        found
            .map(|_| ())
            .ok_or_else(super::shared::schedule::missing_lock_row)
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

/// Creates a uniquely named database (`xjob_test_<random>`) on the server of `base_url`;
/// returns its URL, with the same credentials, host and options.
pub async fn create_scratch_database(base_url: &str) -> StoreResult<String> {
    let name = format!("xjob_test_{:016x}", fastrand::u64(..));
    let url = replace_database(base_url, &name)?;
    let mut conn = PgConnection::connect(base_url)
        .await
        .map_err(StoreError::Unavailable)?;
    // The name is ours (hex digits only), so it is safe to splice into the statement.
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .map_err(map_error)?;
    conn.close().await.map_err(map_error)?;
    Ok(url)
}

/// `base_url` with its database (the path) replaced by `database`; the query string is kept.
fn replace_database(base_url: &str, database: &str) -> StoreResult<String> {
    // The URL holds a password: the message names only what is wrong with it.
    let invalid =
        || StoreError::InvalidUrl("expected postgres://USER:PASSWORD@HOST/DB".to_string());
    let (scheme, rest) = base_url.split_once("://").ok_or_else(invalid)?;
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let authority = before_query.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(invalid());
    }
    let mut url = format!("{scheme}://{authority}/{database}");
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    Ok(url)
}

/// The server of `XJOB_TEST_POSTGRES_URL` for this backend's own tests; `None` (with a message)
/// when the variable is not set.
#[cfg(test)]
pub(crate) fn test_server_url() -> Option<String> {
    match std::env::var("XJOB_TEST_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) => {
            eprintln!("skipping a postgres test: XJOB_TEST_POSTGRES_URL is not set");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url_is_replaced_and_its_options_kept() {
        let replaced = |url: &str| replace_database(url, "scratch").ok();
        assert_eq!(
            replaced("postgres://u:p@127.0.0.1:5432/xjob").as_deref(),
            Some("postgres://u:p@127.0.0.1:5432/scratch")
        );
        assert_eq!(
            replaced("postgresql://h/xjob?sslmode=disable").as_deref(),
            Some("postgresql://h/scratch?sslmode=disable")
        );
        assert_eq!(
            replaced("postgres://h:1").as_deref(),
            Some("postgres://h:1/scratch")
        );
        assert_eq!(replaced("not a url"), None);
    }

    #[tokio::test]
    async fn connections_ask_the_server_to_end_transactions_left_idle() {
        let Some(server) = test_server_url() else {
            return;
        };
        let url = create_scratch_database(&server).await.expect("scratch db");
        let store = PgStore::connect(&url).await.expect("store");
        let timeout: String = sqlx::query_scalar("SHOW idle_in_transaction_session_timeout")
            .fetch_one(&store.pool)
            .await
            .expect("setting");
        assert_eq!(timeout, IDLE_IN_TRANSACTION_TIMEOUT);
        store.close().await;
    }

    /// The day counts' statements can read the day's rows through the trigger-time index,
    /// which is partial (`trigger_time_ms > 0`): a generic plan (what a prepared statement gets
    /// once it has run a few times) only uses it when the statement states that condition
    /// itself. Sequential scans are priced out, so any plan the index allows is chosen.
    #[tokio::test]
    async fn the_day_counts_can_read_through_the_trigger_time_index() {
        use crate::store::shared::report::{day_counts_by_job_query, day_counts_query};
        let Some(server) = test_server_url() else {
            return;
        };
        let url = create_scratch_database(&server).await.expect("scratch db");
        let store = PgStore::connect(&url).await.expect("store");
        let mut conn = store.pool.acquire().await.expect("connection");
        for setting in [
            "SET enable_seqscan = off",
            "SET plan_cache_mode = force_generic_plan",
        ] {
            sqlx::raw_sql(setting)
                .execute(&mut *conn)
                .await
                .expect("setting");
        }
        let statements = [
            day_counts_query::<sqlx::Postgres>(1, 2).text().to_string(),
            day_counts_by_job_query::<sqlx::Postgres>(1, 2)
                .text()
                .to_string(),
        ];
        for (index, text) in statements.iter().enumerate() {
            sqlx::raw_sql(&format!("PREPARE day_{index} (BIGINT, BIGINT) AS {text}"))
                .execute(&mut *conn)
                .await
                .expect("prepare");
            let plan: Vec<String> =
                sqlx::query_scalar(&format!("EXPLAIN EXECUTE day_{index} (1, 2)"))
                    .fetch_all(&mut *conn)
                    .await
                    .expect("plan");
            let plan = plan.join("\n");
            assert!(
                plan.contains("ix_log_trigger_time") && !plan.contains("Seq Scan"),
                "{text}\n{plan}"
            );
        }
        drop(conn);
        store.close().await;
    }
}
