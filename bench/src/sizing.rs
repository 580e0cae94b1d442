//! The database's size during a run with a short log retention (`--log-retention-s`): sampled
//! every few seconds from the first fire to the end of the window and printed as a curve, to
//! show whether the log levels off (docs/benchmarks.md, "Log storage under retention").

use std::path::{Path, PathBuf};
use std::time::Duration;

use xjob_admin::store::Store;

use crate::clock::now_ms;

/// One point of the curve.
#[derive(Debug, Clone, Copy)]
pub struct SizeSample {
    /// Seconds since the first fire.
    pub at_s: i64,
    /// Rows in `xjob_log`.
    pub rows: i64,
    /// SQLite: main file + WAL as the file system counts them; servers: the log table with its
    /// indexes as the server reports it.
    pub bytes: u64,
    /// SQLite: the part of `bytes` that is the WAL file (it keeps its largest size until a
    /// checkpoint can truncate it); servers: 0.
    pub wal_bytes: u64,
}

/// Samples every `every` from now until `end_ms`; a failed read is skipped (the admin may hold
/// the file's write lock for a moment), not fatal.
pub async fn sample_until(
    store: &Store,
    sqlite_file: Option<&Path>,
    first_fire_ms: i64,
    end_ms: i64,
    every: Duration,
) -> Vec<SizeSample> {
    let mut ticks = tokio::time::interval(every);
    let mut samples = Vec::new();
    while now_ms() < end_ms {
        ticks.tick().await;
        let Ok(storage) = store.log_storage().await else {
            continue;
        };
        let (bytes, wal_bytes) = match sqlite_file {
            Some(path) => (file_len(path), file_len(&wal_path(path))),
            None => (u64::try_from(storage.bytes).unwrap_or(0), 0),
        };
        samples.push(SizeSample {
            at_s: (now_ms() - first_fire_ms) / 1000,
            rows: storage.rows,
            bytes: bytes + wal_bytes,
            wal_bytes,
        });
    }
    samples
}

fn wal_path(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", path.display()))
}

/// A file's length; 0 when it does not exist (no WAL yet).
fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

/// The curve as a Markdown table on stderr.
pub fn print_curve(samples: &[SizeSample]) {
    eprintln!("| t (s) | rows | size (MB) | of which WAL (MB) | bytes/row |");
    eprintln!("|---|---|---|---|---|");
    for sample in samples {
        eprintln!(
            "| {} | {} | {:.1} | {:.1} | {} |",
            sample.at_s,
            sample.rows,
            sample.bytes as f64 / 1e6,
            sample.wal_bytes as f64 / 1e6,
            sample.bytes / sample.rows.max(1) as u64
        );
    }
}
