//! A lease renewal racing a take-over of stranded runs, on the server databases (SQLite has one
//! writer, so the two cannot interleave there). Needs statements the store does not offer: a
//! row lock held from outside, and the server's view of which sessions wait for a lock.
//! Skipped (with a message) when `XJOB_TEST_POSTGRES_URL` / `XJOB_TEST_MYSQL_URL` are not set.

use std::time::Duration;

use sqlx::{Connection, MySqlConnection, PgConnection};

use crate::model::{LogId, NewRun, NodeIdentity, RunStatus, TriggerType};
use crate::store::Store;
use crate::store::conformance::{group, job};

/// How long the test waits for something that should happen promptly.
const DEADLINE: Duration = Duration::from_secs(10);

/// A connection of the test's own to the scratch database.
enum Outside {
    Postgres(PgConnection),
    Mysql(MySqlConnection),
}

impl Outside {
    async fn connect(url: &str) -> Outside {
        if url.starts_with("postgres") {
            Outside::Postgres(PgConnection::connect(url).await.expect("connect"))
        } else {
            Outside::Mysql(MySqlConnection::connect(url).await.expect("connect"))
        }
    }

    /// Opens a transaction holding the row lock of run `id`.
    async fn lock_run(&mut self, id: LogId) {
        let statement = "SELECT id FROM xjob_log WHERE id = ";
        match self {
            Outside::Postgres(conn) => {
                sqlx::query("BEGIN")
                    .execute(&mut *conn)
                    .await
                    .expect("begin");
                sqlx::query(&format!("{statement}$1 FOR UPDATE"))
                    .bind(id.0)
                    .fetch_one(&mut *conn)
                    .await
                    .expect("lock");
            }
            Outside::Mysql(conn) => {
                sqlx::query("BEGIN")
                    .execute(&mut *conn)
                    .await
                    .expect("begin");
                sqlx::query(&format!("{statement}? FOR UPDATE"))
                    .bind(id.0)
                    .fetch_one(&mut *conn)
                    .await
                    .expect("lock");
            }
        }
    }

    async fn commit(&mut self) {
        match self {
            Outside::Postgres(conn) => {
                sqlx::query("COMMIT")
                    .execute(&mut *conn)
                    .await
                    .expect("commit");
            }
            Outside::Mysql(conn) => {
                sqlx::query("COMMIT")
                    .execute(&mut *conn)
                    .await
                    .expect("commit");
            }
        }
    }

    /// How many sessions of this database wait for a lock now.
    async fn lock_waits(&mut self) -> i64 {
        match self {
            Outside::Postgres(conn) => sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&mut *conn)
            .await
            .expect("pg_stat_activity"),
            // MariaDB's lock views lag behind or miss a wait; a statement of these two kinds
            // still in flight while the test holds the run's row lock is waiting for a lock.
            Outside::Mysql(conn) => sqlx::query_scalar(
                "SELECT count(*) FROM information_schema.PROCESSLIST \
                 WHERE DB = DATABASE() AND COMMAND IN ('Query', 'Execute') AND ID <> CONNECTION_ID() \
                 AND (INFO LIKE '%FOR UPDATE%' OR INFO LIKE 'UPDATE xjob_node%')",
            )
            .fetch_one(&mut *conn)
            .await
            .expect("processlist"),
        }
    }

    /// Waits until at least `count` sessions wait for a lock, or until `done` has finished.
    async fn until_waiting_or_done(
        &mut self,
        count: i64,
        done: &tokio::task::JoinHandle<Vec<LogId>>,
    ) {
        let waited = tokio::time::timeout(DEADLINE, async {
            while !done.is_finished() && self.lock_waits().await < count {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "neither a lock wait nor the task's end came"
        );
    }
}

/// The server databases configured for tests, as fresh scratch databases.
async fn server_databases() -> Vec<String> {
    let mut urls = Vec::new();
    for variable in ["XJOB_TEST_POSTGRES_URL", "XJOB_TEST_MYSQL_URL"] {
        match std::env::var(variable) {
            Ok(base) => urls.push(
                Store::create_scratch_database(&base)
                    .await
                    .expect("scratch database"),
            ),
            Err(_) => eprintln!("skipping a backend: {variable} is not set"),
        }
    }
    urls
}

/// An owner whose lease lapsed renews it while another admin takes its unsent run over, the
/// take-over stalled on the run's row lock (as under load): either the owner finds the run
/// still its own after renewing (and sends it) or the take-over gets it, never both. Before
/// the owner's node row was locked for the take-over, both did: the take-over judged the lease
/// on what it read before it waited, and the run was sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_renewal_during_a_take_over_leaves_the_run_to_exactly_one_admin() {
    for url in server_databases().await {
        let backend = if url.starts_with("postgres") {
            "postgres"
        } else {
            "mysql"
        };
        let store = Store::connect(&url).await.expect("store");
        let group = store.insert_group(&group("app")).await.expect("group");
        let job = store.insert_job(&job(group.id, 0)).await.expect("job");
        // The owner's lease ended at 1 s; the adopter's holds.
        let owner_epoch = store.register_node("owner", 0, 1_000).await.expect("node");
        let adopter_epoch = store
            .register_node("adopter", 0, 100_000)
            .await
            .expect("node");
        let owner = NodeIdentity::new("owner", owner_epoch);
        let adopter = NodeIdentity::new("adopter", adopter_epoch);
        let run = NewRun {
            job_id: job.id,
            group_id: job.group_id,
            fire_key: Some(NewRun::fire_key(job.id, 2_000, 0, 0)),
            status: RunStatus::Running,
            trigger_type: TriggerType::Cron,
            scheduled_at_ms: 2_000,
            handler: job.handler.clone(),
            params: String::new(),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trigger_msg: String::new(),
            owner_node: owner.node_id.clone(),
            epoch: owner.epoch,
            dispatch_at_ms: 0,
            trace_id: String::new(),
        };
        let id = store.insert_runs(&[run]).await.expect("run")[0];

        let mut outside = Outside::connect(&url).await;
        let mut watcher = Outside::connect(&url).await;
        outside.lock_run(id).await;
        let take_over = tokio::spawn({
            let (store, adopter) = (store.clone(), adopter.clone());
            async move {
                let adopted = store
                    .adopt_stranded(&[id], &adopter, 5_000, 5_000)
                    .await
                    .expect("adopt");
                adopted.iter().map(|run| run.id).collect::<Vec<LogId>>()
            }
        });
        watcher.until_waiting_or_done(1, &take_over).await;
        assert!(
            !take_over.is_finished(),
            "{backend}: the take-over waits for the row lock"
        );

        // The owner renews, then reads whether the run is still its own, as `send_allowed`
        // does before sending it.
        // The owner is another admin, with connections of its own.
        let owner_store = Store::connect(&url).await.expect("owner's store");
        let renewal = tokio::spawn({
            let (store, owner) = (owner_store.clone(), owner.clone());
            async move {
                assert!(store.renew_node(&owner, 100_000).await.expect("renew"));
                store.owned_unsent_runs(&[id], &owner).await.expect("owned")
            }
        });
        // Either the renewal waits behind the take-over, or it went through.
        watcher.until_waiting_or_done(2, &renewal).await;
        outside.commit().await;

        let (adopted, kept) = tokio::time::timeout(DEADLINE, async {
            (
                take_over.await.expect("take-over task"),
                renewal.await.expect("renewal task"),
            )
        })
        .await
        .expect("both end once the row lock is released");
        assert_eq!(
            adopted.len() + kept.len(),
            1,
            "{backend}: the run is the adopter's ({adopted:?}) or still the owner's ({kept:?}), \
             never both"
        );
        owner_store.close().await;
        store.close().await;
    }
}
