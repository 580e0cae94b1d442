//! Log storage stays bounded under steady load (issue 11, "storage that stays bounded"): one
//! admin process (`xjob serve`), one executor of the SDK in this test process, 200 jobs firing
//! every second, `log_retention = "6s"` and `retention_interval = "1s"`. The test samples the
//! database's size once a second for 36 s and checks that it stops growing once the retention
//! horizon (6 s + one interval) has passed:
//!
//! - the rows of the log stay under what the retention keeps (200 jobs × (6 s + 1 s + the
//!   fires planned ahead and still in flight)), and above half of it (the load really ran);
//! - the largest size of the last third of the window is at most `growth` above the largest of
//!   the middle third (without retention it grows by a quarter or more over that span);
//! - the largest size is under an absolute bound: the rows kept times a generous size per row,
//!   plus (SQLite) room for the WAL file.
//!
//! SQLite measures the file itself (main file + WAL); PostgreSQL (`XJOB_TEST_POSTGRES_URL`)
//! the table with its indexes (`pg_total_relation_size`), without the growth bound: dead row
//! versions are only reused after autovacuum, which visits a database about once a minute, so
//! within 36 s it shows the rows bounded but not yet the size; MariaDB (`XJOB_TEST_MYSQL_URL`) InnoDB's table statistics. The curves and the bytes per run
//! are printed; docs/operations.md ("Sizing the log") quotes them.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::cluster::{Cluster, Database, Timing};
use common::wait_until;
use xjob_proto::pb;

// One scenario at a time, and never beside the timing scenarios of the other modules.
use common::ONE_AT_A_TIME;

/// Jobs firing every second.
const JOBS: i64 = 200;
/// `log_retention`: short, so the log levels off early in the window (the bounds below scale
/// with it; a longer one only makes the test slower).
const RETENTION_S: i64 = 6;
/// `retention_interval`.
const INTERVAL_S: i64 = 1;
/// Fires that exist beyond the retention: planned ahead (up to 5 s), in flight, and the ones
/// expired but waiting for the next pass.
const AHEAD_S: i64 = 8;
/// How long the size is sampled, in seconds (three thirds of 12 s: the first one covers the
/// retention horizon of 7 s with room for a slow start).
const WINDOW_S: u64 = 36;
/// A size per run row no backend should come near (measured: well under 1 KB).
const BYTES_PER_ROW_BOUND: u64 = 2_048;

/// How a backend's size is read and how much it may still grow after the horizon.
struct Bounds {
    /// The last third's largest size over the middle third's largest, at most; `None` where
    /// the database reclaims on its own schedule, slower than the window.
    growth: Option<f64>,
    /// Bytes allowed beyond the rows (the SQLite WAL file, which keeps its largest size).
    fixed_bytes: u64,
}

/// Where the size comes from.
enum SizeSource {
    /// A SQLite file: the main file plus its `-wal`.
    File(PathBuf),
    /// The server's own figure for the log table ([`xjob_admin::store::Store::log_storage`]).
    Server,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at_s: f64,
    rows: i64,
    bytes: u64,
}

fn retention_toml() -> String {
    format!("log_retention = \"{RETENTION_S}s\"\nretention_interval = \"{INTERVAL_S}s\"\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_file_stops_growing_under_a_short_retention() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("xjob.db");
    let database = Database::sqlite_file(&path, "sqlite");
    let bounds = Bounds {
        growth: Some(0.2),
        // The WAL grows to what the writes between two checkpoints need and keeps that size.
        fixed_bytes: 16 << 20,
    };
    steady_load(database, SizeSource::File(path), bounds).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_log_table_stops_growing_under_a_short_retention() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres().await? else {
        return Ok(());
    };
    let bounds = Bounds {
        // Dead row versions (every run is updated as it is claimed, sent and finished, and
        // deleted rows) are reused only after autovacuum, which visits a database about once
        // a minute (`autovacuum_naptime`): within the window the table may grow all along
        // (measured: ≈ 180 KB/s). Only the rows and a bound on everything written are checked.
        growth: None,
        fixed_bytes: 24 << 20,
    };
    steady_load(database, SizeSource::Server, bounds).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_log_table_stops_growing_under_a_short_retention() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    let bounds = Bounds {
        // InnoDB's statistics move in whole extents; freed pages are reused in place.
        growth: Some(0.5),
        fixed_bytes: 4 << 20,
    };
    steady_load(database, SizeSource::Server, bounds).await
}

async fn steady_load(database: Database, source: SizeSource, bounds: Bounds) -> anyhow::Result<()> {
    let label = database.label;
    let mut cluster =
        Cluster::start_configured(database, 1, 1, Timing::default(), &retention_toml()).await?;
    let outcome = async {
        cluster
            .create_jobs(JOBS as usize, pb::MisfireStrategy::DoNothing)
            .await?;
        // Started jobs first fire a few seconds later: the window starts with the first run.
        wait_until(Duration::from_secs(20), "the first runs", || async {
            let storage = cluster.store.log_storage().await.ok()?;
            (storage.rows > 0).then_some(())
        })
        .await?;
        let samples = sample(&cluster, &source).await?;
        print_curve(label, &samples);
        check(&samples, &bounds)
    }
    .await;
    cluster.finish(outcome).await
}

/// One sample a second for [`WINDOW_S`] seconds.
async fn sample(cluster: &Cluster, source: &SizeSource) -> anyhow::Result<Vec<Sample>> {
    let started = Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    let mut samples = Vec::new();
    while started.elapsed() < Duration::from_secs(WINDOW_S) {
        ticks.tick().await;
        let storage = cluster.store.log_storage().await?;
        let bytes = match source {
            SizeSource::File(path) => file_bytes(path),
            SizeSource::Server => u64::try_from(storage.bytes)?,
        };
        samples.push(Sample {
            at_s: started.elapsed().as_secs_f64(),
            rows: storage.rows,
            bytes,
        });
    }
    Ok(samples)
}

/// The SQLite file and its WAL, as the file system counts them.
fn file_bytes(path: &Path) -> u64 {
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    [path, wal.as_path()]
        .iter()
        .map(|file| std::fs::metadata(file).map(|meta| meta.len()).unwrap_or(0))
        .sum()
}

fn print_curve(label: &str, samples: &[Sample]) {
    eprintln!("{label}: {JOBS} jobs/s, retention {RETENTION_S} s every {INTERVAL_S} s");
    eprintln!("  t (s)    rows    bytes   bytes/row");
    for sample in samples.iter().step_by(5) {
        eprintln!(
            "  {:5.0} {:7} {:8} {:8}",
            sample.at_s,
            sample.rows,
            sample.bytes,
            sample.bytes / sample.rows.max(1) as u64
        );
    }
}

fn check(samples: &[Sample], bounds: &Bounds) -> anyhow::Result<()> {
    let third = WINDOW_S as f64 / 3.0;
    let middle: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.at_s >= third && s.at_s < 2.0 * third)
        .collect();
    let last: Vec<&Sample> = samples.iter().filter(|s| s.at_s >= 2.0 * third).collect();
    anyhow::ensure!(
        middle.len() >= 10 && last.len() >= 10,
        "too few samples (a loaded machine?): {} and {}",
        middle.len(),
        last.len()
    );
    let rows_bound = JOBS * (RETENTION_S + INTERVAL_S + AHEAD_S);
    let max_rows = samples.iter().map(|s| s.rows).max().unwrap_or(0);
    let min_last_rows = last.iter().map(|s| s.rows).min().unwrap_or(0);
    anyhow::ensure!(
        max_rows <= rows_bound,
        "the log kept {max_rows} rows, more than the retention's {rows_bound}"
    );
    anyhow::ensure!(
        min_last_rows >= JOBS * RETENTION_S / 2,
        "only {min_last_rows} rows in the last third: the load did not run"
    );
    let max_middle = middle.iter().map(|s| s.bytes).max().unwrap_or(0);
    let max_last = last.iter().map(|s| s.bytes).max().unwrap_or(0);
    let grown = max_last as f64 / max_middle.max(1) as f64 - 1.0;
    eprintln!(
        "largest size: middle third {max_middle} B, last third {max_last} B ({:+.1} %); rows at \
         most {max_rows} (bound {rows_bound})",
        grown * 100.0
    );
    if let Some(growth) = bounds.growth {
        anyhow::ensure!(
            grown <= growth,
            "the size still grew by {:.1} % after the retention horizon (bound {:.0} %)",
            grown * 100.0,
            growth * 100.0
        );
    }
    let size_bound = rows_bound as u64 * BYTES_PER_ROW_BOUND + bounds.fixed_bytes;
    let max_bytes = samples.iter().map(|s| s.bytes).max().unwrap_or(0);
    anyhow::ensure!(
        max_bytes <= size_bound,
        "the database took {max_bytes} B, more than {size_bound} B"
    );
    Ok(())
}
