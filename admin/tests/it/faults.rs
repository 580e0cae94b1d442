//! Faults of the database under load, with real processes: an admin process (`xjob serve`) and
//! an executor of the SDK in this test process, jobs firing every second. Each test breaks the
//! database for a moment and checks that the admin says so (gRPC health), resumes on its own,
//! and that every (job, scheduled second) of the window was run once or recorded with a reason.
//!
//! - A full disk under SQLite: the test mounts a 20 MB tmpfs (it must run as root; otherwise it
//!   is skipped with a message), puts the database there and fills the file system.
//! - A connection killed mid-transaction: PostgreSQL (`pg_terminate_backend`) and MariaDB
//!   (`KILL CONNECTION`), when `XJOB_TEST_POSTGRES_URL` / `XJOB_TEST_MYSQL_URL` are set.
//!
//! Figures measured are printed and written up in docs/operations.md ("Faults").

use crate::common;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::cluster::{Cluster, Database, Timing, Window, ceil_second, health_of, now_ms};
use common::ledger::{Fate, Ledger};
use common::wait_until;
use sqlx::Connection;
use tonic_health::pb::health_check_response::ServingStatus;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;

// One scenario at a time, and never beside the timing scenarios of the other modules.
use common::ONE_AT_A_TIME;

/// Jobs firing every second in each scenario.
const JOBS: usize = 100;

// ---------------------------------------------------------------------------------------------
// A full disk

/// A tmpfs mounted for one test, unmounted when dropped (also when the test fails).
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (e.g. "20m"); None, after saying why, when that is impossible.
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = std::env::temp_dir().join(format!("xjob-faults-disk-{}", std::process::id()));
        if let Err(error) = std::fs::create_dir_all(&dir) {
            eprintln!("skipped: cannot create {}: {error}", dir.display());
            return None;
        }
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output();
        match mounted {
            Ok(output) if output.status.success() => Some(SmallDisk { dir }),
            Ok(output) => {
                eprintln!(
                    "skipped: mounting a tmpfs needs root (or CAP_SYS_ADMIN): {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                );
                let _ = std::fs::remove_dir(&dir);
                None
            }
            Err(error) => {
                eprintln!("skipped: cannot run mount: {error}");
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// Writes a file until the file system is full; returns its path and size.
    fn fill(&self) -> anyhow::Result<(PathBuf, u64)> {
        let path = self.dir.join("filler");
        let mut file = std::fs::File::create(&path)?;
        let chunk = vec![0x5a_u8; 64 * 1024];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(error) if error.raw_os_error() == Some(28) => break, // ENOSPC
                Err(error) => return Err(error.into()),
            }
        }
        // tmpfs has no delayed allocation: a write that returned is in memory already.
        Ok((path, written))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.dir).status();
        if !matches!(unmounted, Ok(status) if status.success()) {
            // Still busy (a process of a failed test holds a file): detach it now, freed later.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// One admin on SQLite whose data sits on a 20 MB tmpfs, 100 jobs every second: the disk is
/// filled for 10 s, then the filler is deleted. Health goes NOT_SERVING within seconds and
/// SERVING again after; firing resumes within 2 s; no fire of the window is run twice, and each
/// one ran or has a row with the reason it did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_stops_serving_and_firing_resumes_when_space_returns() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(disk) = SmallDisk::mount("20m") else {
        return Ok(());
    };
    let database = Database::sqlite_file(&disk.dir.join("xjob.db"), "sqlite on a 20 MB tmpfs");
    let mut cluster = Cluster::start(database, 1, 1, Timing::default()).await?;
    let outcome = async {
        cluster
            .create_jobs(JOBS, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms + 3_000).await?;

        let filled_at = Instant::now();
        let (filler, filled) = disk.fill()?;
        // SQLite keeps writing into the space its WAL file already has; the checkpoint cannot
        // grow the database file, so the WAL cannot start over, and the first failed write
        // comes when it needs to grow, some seconds later.
        let url = cluster.admins[0].spec.url();
        wait_until(
            Duration::from_secs(60),
            "a write to fail on the full disk",
            || async {
                let loops = dashboard(&url).await?.loops;
                loops
                    .iter()
                    .any(|state| !state.last_error.is_empty())
                    .then_some(())
            },
        )
        .await?;
        let full_at = Instant::now();
        let first_failure_after = filled_at.elapsed();
        wait_until(Duration::from_secs(10), "NOT_SERVING", || async {
            let overall = health_of(&url, "").await?;
            let serving = dashboard(&url).await?.serving;
            (overall == ServingStatus::NotServing && !serving).then_some(())
        })
        .await?;
        let not_serving_after = full_at.elapsed();
        tokio::time::sleep(Duration::from_secs(10).saturating_sub(full_at.elapsed())).await;
        let held = full_at.elapsed();

        std::fs::remove_file(&filler)?;
        let freed_at = Instant::now();
        let freed_ms = now_ms();
        let resumed_after = first_fire_after(&cluster, freed_ms).await?;
        cluster.wait_health_everywhere(true).await?;
        let serving_after = freed_at.elapsed();
        eprintln!(
            "disk filled ({} MB filler): first failed write after {} ms; writes failing for {} \
             ms: NOT_SERVING after {} ms; space freed: a fire ran {} ms later, SERVING after {} \
             ms",
            filled / 1_000_000,
            first_failure_after.as_millis(),
            held.as_millis(),
            not_serving_after.as_millis(),
            resumed_after.as_millis(),
            serving_after.as_millis()
        );
        anyhow::ensure!(
            resumed_after <= Duration::from_secs(2),
            "firing resumed {} ms after space was freed (bound: 2 s)",
            resumed_after.as_millis()
        );

        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 5_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print("full disk");
        ledger.assert_no_duplicate()?;
        ledger.assert_fired_or_misfired()?;
        assert_fired_after(&ledger, freed_ms + 2_000)
    }
    .await;
    cluster.finish(outcome).await
}

/// The dashboard of the admin at `url`, or None when it does not answer.
async fn dashboard(url: &str) -> Option<pb::GetDashboardResponse> {
    let mut client = JobAdminClient::connect(url.to_string()).await.ok()?;
    let request = pb::GetDashboardRequest::default();
    tokio::time::timeout(Duration::from_secs(2), client.get_dashboard(request))
        .await
        .ok()?
        .ok()
        .map(tonic::Response::into_inner)
}

/// How long after `since_ms` the handlers first saw a fire scheduled at or after it.
async fn first_fire_after(cluster: &Cluster, since_ms: i64) -> anyhow::Result<Duration> {
    let started = Instant::now();
    wait_until(
        Duration::from_secs(15),
        "a fire scheduled after the fault to run",
        || async {
            let records = cluster.records_snapshot();
            records
                .iter()
                .any(|(_, scheduled_ms)| *scheduled_ms >= since_ms)
                .then_some(())
        },
    )
    .await?;
    Ok(started.elapsed())
}

/// Every fire of the window from `from_ms` on ran exactly once: the admin is firing normally
/// again, not just recording misfires.
fn assert_fired_after(ledger: &Ledger, from_ms: i64) -> anyhow::Result<()> {
    let later: Vec<&Fate> = ledger
        .fates
        .iter()
        .filter(|((_, second), _)| *second >= from_ms)
        .map(|(_, fate)| fate)
        .collect();
    anyhow::ensure!(!later.is_empty(), "no second of the window after the fault");
    let not_fired = later
        .iter()
        .filter(|fate| !matches!(fate, Fate::FiredOnce))
        .count();
    anyhow::ensure!(
        not_fired == 0,
        "{not_fired} of {} fires after the fault did not run once",
        later.len()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Lost connections

/// Kills every other connection to the test's database; returns how many.
type Killer = fn(&str) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<u64>> + Send + '_>>;

fn kill_postgres_connections(
    url: &str,
) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<u64>> + Send + '_>> {
    Box::pin(async move {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        let killed: Vec<(bool,)> = sqlx::query_as(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_all(&mut conn)
        .await?;
        conn.close().await?;
        Ok(killed.iter().filter(|(done,)| *done).count() as u64)
    })
}

fn kill_mariadb_connections(
    url: &str,
) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<u64>> + Send + '_>> {
    Box::pin(async move {
        let url = url.replacen("mariadb://", "mysql://", 1);
        let mut conn = sqlx::MySqlConnection::connect(&url).await?;
        let ids: Vec<(u64,)> = sqlx::query_as(
            "SELECT CAST(id AS UNSIGNED) FROM information_schema.processlist \
             WHERE db = DATABASE() AND id <> CONNECTION_ID()",
        )
        .fetch_all(&mut conn)
        .await?;
        let mut killed = 0;
        for (id,) in ids {
            // The id comes from the server and is a number: safe to splice in.
            if sqlx::query(&format!("KILL CONNECTION {id}"))
                .execute(&mut conn)
                .await
                .is_ok()
            {
                killed += 1;
            }
        }
        conn.close().await?;
        Ok(killed)
    })
}

/// One admin on `database`, 100 jobs every second; every connection of the admin to the
/// database is killed 12 times in 3 s (under that load, transactions are open at most
/// moments): the admin keeps firing afterwards, nothing runs twice, every fire of the window
/// ran once or was recorded as a misfire, and health is SERVING at the end.
async fn connections_killed_under_load(
    database: Database,
    kill: Killer,
    scenario: &str,
) -> anyhow::Result<()> {
    let url = database.url.clone();
    let mut cluster = Cluster::start(database, 1, 1, Timing::default()).await?;
    let outcome = async {
        cluster
            .create_jobs(JOBS, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms + 3_000).await?;
        let mut killed = 0;
        for _ in 0..12 {
            killed += kill(&url).await?;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let kills_end_ms = now_ms();
        let resumed_after = first_fire_after(&cluster, kills_end_ms).await?;
        cluster.wait_health_everywhere(true).await?;
        eprintln!(
            "{scenario}: {killed} connections killed in 12 rounds over 3 s; a fire ran {} ms \
             after the last kill",
            resumed_after.as_millis()
        );
        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 5_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print(scenario);
        ledger.assert_no_duplicate()?;
        ledger.assert_fired_or_misfired()?;
        anyhow::ensure!(killed > 0, "no connection was killed");
        assert_fired_after(&ledger, kills_end_ms + 2_000)
    }
    .await;
    cluster.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_connections_killed_mid_transaction_do_not_stop_the_schedule() -> anyhow::Result<()>
{
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres().await? else {
        return Ok(());
    };
    connections_killed_under_load(database, kill_postgres_connections, "postgresql kills").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_connections_killed_mid_transaction_do_not_stop_the_schedule() -> anyhow::Result<()>
{
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    connections_killed_under_load(database, kill_mariadb_connections, "mariadb kills").await
}
