//! Quiet runs: runs whose handler wrote no line of its own. Their two lines (the runner's start
//! and end lines) go into one shared file per second of the runs' `log_date_ms`,
//! `{log_dir}/{date}/runs-{HHmmss}.log`, instead of a file each.
//!
//! Creating a file is most of what a run log costs: at 5 000 runs a second, opening, writing
//! and closing one new file per run took half of the executor's CPU (docs/benchmarks.md, *Where
//! the time goes at 5 000 fires/s*). The shared file stays open while its second's runs end,
//! so a second of quiet runs costs one open.
//!
//! Each run is one record, its lines length-prefixed so that no text in them (a parameter
//! with a newline) can be taken for the next record:
//!
//! ```text
//! {log_id} {byte length}\n
//! {the run's lines, each "yyyy-MM-dd HH:mm:ss.SSS text\n"}
//! ```
//!
//! A record is written with one append, so a reader sees whole records before any torn one
//! (a crash in the middle of a write): the scan stops at the first record it cannot read
//! whole. `ReadLog` of a run without a file of its own looks here, by the second of the
//! `log_date_ms` it is given, the same instant the run was filed under. A handler that writes
//! after its run ended adds a record of those lines: a run's records are read in order as one.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{Local, TimeZone, Timelike};

/// Shared files kept open: the seconds whose runs are still ending (a late run of an earlier
/// second does not close the current one).
const OPEN_FILES: usize = 4;

/// The shared file of the runs filed under `log_date_ms`, in `date_dir` (their date folder).
pub(super) fn path_in(date_dir: &Path, log_date_ms: i64) -> PathBuf {
    let time = Local
        .timestamp_millis_opt(log_date_ms)
        .single()
        .unwrap_or_else(Local::now);
    date_dir.join(format!(
        "runs-{:02}{:02}{:02}.log",
        time.hour(),
        time.minute(),
        time.second()
    ))
}

/// The shared files open for appending, the most recently opened last.
#[derive(Debug, Default)]
pub(super) struct QuietFiles {
    open: Mutex<Vec<(PathBuf, File)>>,
}

impl QuietFiles {
    /// Appends the record of run `log_id` with `lines` (formatted, newline-terminated) to the
    /// shared file at `path`, creating it (and its date folder) if need be.
    pub(super) fn append(&self, path: &Path, log_id: i64, lines: &str) -> io::Result<()> {
        let mut record = format!("{log_id} {}\n", lines.len());
        record.push_str(lines);
        let mut open = self.lock();
        let index = match open.iter().position(|(open_path, _)| open_path == path) {
            Some(index) => index,
            None => {
                let file = super::append::open_append(path)?;
                if open.len() == OPEN_FILES {
                    open.remove(0);
                }
                open.push((path.to_path_buf(), file));
                open.len() - 1
            }
        };
        open[index].1.write_all(record.as_bytes())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(PathBuf, File)>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The lines of run `log_id` in the shared file at `path`, its records in order; `None` if
/// the file holds no whole record of it.
pub(super) fn find(path: &Path, log_id: i64) -> io::Result<Option<Vec<u8>>> {
    find_in(BufReader::new(File::open(path)?), log_id)
}

fn find_in(mut reader: impl BufRead, log_id: i64) -> io::Result<Option<Vec<u8>>> {
    let mut found: Option<Vec<u8>> = None;
    let mut header = String::new();
    let mut record = Vec::new();
    loop {
        header.clear();
        if reader.read_line(&mut header)? == 0 {
            return Ok(found);
        }
        let Some((id, length)) = parse_header(&header) else {
            return Ok(found);
        };
        record.clear();
        let read = (&mut reader).take(length).read_to_end(&mut record)?;
        if read as u64 != length {
            return Ok(found);
        }
        if id == log_id {
            found
                .get_or_insert_with(Vec::new)
                .extend_from_slice(&record);
        }
    }
}

/// `"{log_id} {length}\n"`; `None` for anything else (a torn header).
fn parse_header(header: &str) -> Option<(i64, u64)> {
    let (id, length) = header.strip_suffix('\n')?.split_once(' ')?;
    Some((id.parse().ok()?, length.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(log_id: i64, lines: &str) -> String {
        format!("{log_id} {}\n{lines}", lines.len())
    }

    #[test]
    fn a_run_is_found_by_its_log_id_among_others() {
        let file = [
            record(1, "a start\na end\n"),
            record(2, "b start params=x\ny\nb end\n"),
            record(3, "c start\nc end\n"),
        ]
        .concat();
        let found = |log_id| find_in(file.as_bytes(), log_id).expect("read");
        assert_eq!(found(2), Some(b"b start params=x\ny\nb end\n".to_vec()));
        assert_eq!(found(3), Some(b"c start\nc end\n".to_vec()));
        assert_eq!(found(4), None);
    }

    #[test]
    fn the_records_of_one_run_read_as_one_in_order() {
        let file = [
            record(1, "a start\na end\n"),
            record(2, "b start\nb end\n"),
            record(1, "a late line\n"),
        ]
        .concat();
        assert_eq!(
            find_in(file.as_bytes(), 1).expect("read"),
            Some(b"a start\na end\na late line\n".to_vec())
        );
    }

    #[test]
    fn a_torn_record_ends_the_scan_and_is_not_returned() {
        let whole = record(1, "a start\na end\n");
        let torn_lines = format!("{whole}2 14\nb start\n");
        let torn_header = format!("{whole}3 1");
        for file in [&torn_lines, &torn_header] {
            assert_eq!(
                find_in(file.as_bytes(), 1).expect("read"),
                Some(b"a start\na end\n".to_vec())
            );
            assert_eq!(find_in(file.as_bytes(), 2).expect("read"), None);
            assert_eq!(find_in(file.as_bytes(), 3).expect("read"), None);
        }
    }

    #[test]
    fn records_of_two_seconds_go_to_two_files_kept_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let day = dir.path().join("day");
        let files = QuietFiles::default();
        let (first, second) = (day.join("runs-000001.log"), day.join("runs-000002.log"));
        files.append(&first, 1, "one\n").expect("append");
        files.append(&second, 2, "two\n").expect("append");
        files.append(&first, 3, "three\n").expect("append");
        assert_eq!(files.lock().len(), 2, "one open file per second");
        assert_eq!(find(&first, 3).expect("read"), Some(b"three\n".to_vec()));
        assert_eq!(find(&first, 2).expect("read"), None);
        assert_eq!(find(&second, 2).expect("read"), Some(b"two\n".to_vec()));
    }

    #[test]
    fn runs_filed_in_the_same_second_share_a_file() {
        let day = Path::new("day");
        let second_start = 1_700_000_000_000;
        assert_eq!(path_in(day, second_start), path_in(day, second_start + 999));
        assert_ne!(
            path_in(day, second_start),
            path_in(day, second_start + 1_000)
        );
        let name = path_in(day, second_start);
        let name = name
            .file_name()
            .and_then(|name| name.to_str())
            .expect("name");
        assert!(
            name.starts_with("runs-") && name.ends_with(".log"),
            "{name}"
        );
    }
}
