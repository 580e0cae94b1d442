//! Run log files: one file per run at `{log_dir}/{yyyy-MM-dd}/{log_id}.log` (the date of the
//! run's `log_date_ms` in the executor's local zone), written line by line by the runner and by
//! `JobContext::log`, read back in bounded 1-based ranges for `ReadLog`, and swept daily once
//! their date folder is older than the retention.
//!
//! Every line is written with one `write_all` on a file opened in append mode, so a line is
//! visible to readers as soon as the call returns. The file itself is created by the first line
//! a run writes (`RunLog::lazy`): creating files is the slowest step before a handler starts, so
//! the runner queues its start line and the handler is not kept waiting for the file system.
//! The lines a run leaves when it ends (its end line, and the start line of a run whose handler
//! logged nothing) are written by a background thread ([`writer`]), so creating files never
//! delays the runs that start next. The run's result follows its lines through that thread: it
//! is reported only once they are in the file. A `ReadLog` of lines still waiting writes them
//! first. A graceful shutdown writes them all; a process killed outright loses those still
//! waiting together with their results.
//!
//! A run whose handler logged nothing gets no file of its own: its start and end lines go into
//! a file shared by the runs of its second ([`quiet`]), where `ReadLog` finds them.

mod append;
mod pending_starts;
mod quiet;
mod writer;

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use append::open_append;
use chrono::{DateTime, Local, NaiveDate, TimeZone, Utc};
pub(crate) use pending_starts::StartTicket;
use tokio_util::sync::CancellationToken;
use xjob_proto::pb;

/// Most lines one `ReadLog` call returns.
pub(crate) const MAX_LINES_PER_READ: usize = 1000;
/// Most bytes of content one `ReadLog` call returns.
pub(crate) const MAX_BYTES_PER_READ: usize = 1 << 20;
/// Date folder format, as XXL-JOB.
const DATE_DIR_FORMAT: &str = "%Y-%m-%d";

/// The root of the run log files, the writer of the lines runs leave when they end, and the
/// shared files of quiet runs.
#[derive(Clone, Debug)]
pub(crate) struct JobLogStore {
    root: PathBuf,
    writer: Arc<writer::LogWriter<RunLog>>,
    quiet: Arc<quiet::QuietFiles>,
}

impl JobLogStore {
    pub(crate) fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            writer: Arc::default(),
            quiet: Arc::default(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Returns the file of a run: `{root}/{date of log_date_ms, local}/{log_id}.log`.
    pub(crate) fn path_for(&self, log_id: i64, log_date_ms: i64) -> PathBuf {
        let date = Local
            .timestamp_millis_opt(log_date_ms)
            .single()
            .unwrap_or_else(Local::now);
        let mut path = self.root.join(date_dir_name(date));
        path.push(format!("{log_id}.log"));
        path
    }

    /// Creates (or reopens for append) the file of a run.
    pub(crate) fn create(&self, log_id: i64, log_date_ms: i64) -> io::Result<RunLog> {
        let path = self.path_for(log_id, log_date_ms);
        let file = open_append(&path)?;
        Ok(RunLog {
            log_id,
            path,
            quiet: None,
            state: Mutex::new(LogState {
                file_opt: Some(file),
                pending: WaitingLines::default(),
                went_quiet: false,
            }),
        })
    }

    /// The log of a run whose file is created by its first line, starting with `first_line`.
    /// If the handler writes none, the run's lines go to its second's shared file instead.
    pub(crate) fn lazy(
        &self,
        log_id: i64,
        log_date_ms: i64,
        first_line: impl Into<String>,
    ) -> RunLog {
        let mut header = WaitingLines::default();
        header.push(Utc::now(), first_line.into());
        let mut log = RunLog::lazy(log_id, self.path_for(log_id, log_date_ms), header);
        log.quiet = Some(QuietRun {
            files: Arc::clone(&self.quiet),
            log_id,
            log_date_ms,
        });
        log
    }

    /// A store whose writer has no thread: lines handed to
    /// [`append_later`](Self::append_later) are written on the caller's thread (tests whose
    /// clock is paused cannot wait for another thread).
    #[cfg(test)]
    pub(crate) fn inline(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            writer: Arc::new(writer::LogWriter::inline()),
            quiet: Arc::default(),
        }
    }

    /// The lines of a run as they are on disk (its own file, or its second's shared file),
    /// without writing what still waits for the writer.
    #[cfg(test)]
    pub(crate) fn on_disk(&self, log_id: i64, log_date_ms: i64) -> Option<String> {
        let path = self.path_for(log_id, log_date_ms);
        let lines = match std::fs::read(&path) {
            Ok(lines) => Some(lines),
            Err(_) => quiet::find(&Self::quiet_path(&path, log_date_ms), log_id).ok()?,
        };
        lines.map(|lines| String::from_utf8_lossy(&lines).into_owned())
    }

    /// The shared file of quiet runs filed with the run whose own file would be `run_path`.
    fn quiet_path(run_path: &Path, log_date_ms: i64) -> PathBuf {
        quiet::path_in(run_path.parent().unwrap_or(run_path), log_date_ms)
    }

    /// Appends `line` to `log` off the caller's thread, after every line appended before it,
    /// then calls `then` (after the lines are in the file, or failed to be written).
    pub(crate) fn append_later(
        &self,
        log: &Arc<RunLog>,
        line: impl Into<String>,
        then: impl FnOnce() + Send + 'static,
    ) {
        log.push_pending(Utc::now(), line.into());
        // Registered after the line is pending: the writer unregisters only a written log.
        self.writer.register(log);
        self.writer.submit(Arc::clone(log), Box::new(then));
    }

    /// Counts a run queued to start now until the ticket is dropped: the writer waits for
    /// such runs to start before it writes (see [`pending_starts`]).
    pub(crate) fn start_ticket(&self) -> StartTicket {
        self.writer.starts.ticket()
    }

    /// Waits until every line handed to [`append_later`](Self::append_later) is written and
    /// what came with it done (at shutdown).
    pub(crate) async fn drain(&self) {
        self.writer.drain().await;
    }

    /// Drops the lines still queued for the writer, neither written nor followed by what came
    /// with them, as a killed process would (`RunningExecutor::crash`).
    #[cfg_attr(not(any(test, feature = "test-crash")), allow(dead_code))]
    pub(crate) fn abandon(&self) {
        self.writer.abandon();
    }

    /// A store whose writer waits up to `bound` for pending starts (see [`start_ticket`]).
    ///
    /// [`start_ticket`]: Self::start_ticket
    #[cfg(test)]
    pub(crate) fn with_hold_back(root: impl Into<PathBuf>, bound: Duration) -> Self {
        let mut writer = writer::LogWriter::default();
        writer.hold_back_bound = bound;
        Self {
            writer: Arc::new(writer),
            ..Self::new(root)
        }
    }

    /// How many times the writer began to wait for pending starts (a test hook).
    #[cfg(test)]
    pub(crate) fn writer_waits_for_starts(&self) -> usize {
        self.writer.starts.waits()
    }

    /// The writer's test hook.
    #[cfg(test)]
    pub(crate) fn writer_gate(&self) -> &writer::gate::Gate {
        &self.writer.gate
    }

    /// Reads lines `[from_line, ..]` of a run's file, at most [`MAX_LINES_PER_READ`] lines and
    /// [`MAX_BYTES_PER_READ`] bytes. `run_active` says whether the run is still queued or running
    /// here: only a finished run can be at its end, and only its last line may lack a newline.
    pub(crate) fn read(
        &self,
        log_id: i64,
        log_date_ms: i64,
        from_line: i32,
        run_active: bool,
    ) -> pb::ReadLogResponse {
        let from_line = from_line.max(1);
        let path = self.path_for(log_id, log_date_ms);
        // Lines still waiting for the writer are written now: a read that says the run is over
        // (the admin's probe of a stranded run) is answered from the file, which a kill cannot
        // take back. Only if that write failed are they read from memory.
        let unwritten = self.writer.unwritten(log_id, &path).and_then(|log| {
            self.writer.write_now(&log);
            self.writer.unwritten(log_id, &path)
        });
        let read = match unwritten {
            Some(log) => log.read_lines(from_line as usize, !run_active),
            None => Self::read_written(log_id, log_date_ms, &path)
                .and_then(|reader| read_lines(reader, from_line as usize, !run_active)),
        };
        match read {
            Ok(chunk) => pb::ReadLogResponse {
                from_line,
                to_line: from_line - 1 + i32::try_from(chunk.line_count).unwrap_or(i32::MAX),
                content: chunk.content,
                is_end: !run_active && chunk.reached_end,
                fenced: false,
            },
            Err(error) => {
                let content = if error.kind() == io::ErrorKind::NotFound {
                    format!("log file not found: {}", path.display())
                } else {
                    format!("failed to read log file {}: {error}", path.display())
                };
                pb::ReadLogResponse {
                    from_line,
                    to_line: from_line - 1,
                    content,
                    is_end: !run_active,
                    fenced: false,
                }
            }
        }
    }

    /// A reader of a run's written lines: its own file, or its record in its second's shared
    /// file. When neither holds them, the error of opening its own file (`NotFound`).
    fn read_written(log_id: i64, log_date_ms: i64, path: &Path) -> io::Result<Box<dyn BufRead>> {
        let not_own = match File::open(path) {
            Ok(file) => return Ok(Box::new(BufReader::new(file))),
            Err(error) if error.kind() == io::ErrorKind::NotFound => error,
            Err(error) => return Err(error),
        };
        match quiet::find(&Self::quiet_path(path, log_date_ms), log_id) {
            Ok(Some(lines)) => Ok(Box::new(io::Cursor::new(lines))),
            Ok(None) => Err(not_own),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Err(not_own),
            Err(error) => Err(error),
        }
    }
}

/// The log file of one run; shared by the runner and the handler's `JobContext`.
#[derive(Debug)]
pub(crate) struct RunLog {
    log_id: i64,
    path: PathBuf,
    /// Where the lines go if the file was never created by the time the run ends.
    quiet: Option<QuietRun>,
    state: Mutex<LogState>,
}

/// A run whose lines may end up in its second's shared file.
#[derive(Debug)]
struct QuietRun {
    files: Arc<quiet::QuietFiles>,
    log_id: i64,
    log_date_ms: i64,
}

/// The file once opened, and the lines waiting for it to exist.
#[derive(Debug, Default)]
struct LogState {
    file_opt: Option<File>,
    pending: WaitingLines,
    /// The run ended without a line of its handler's, so its lines went to its second's shared
    /// file: any later line follows them there.
    went_quiet: bool,
}

impl RunLog {
    /// A run log whose file is created by its first write; `header` goes first.
    fn lazy(log_id: i64, path: PathBuf, header: WaitingLines) -> RunLog {
        RunLog {
            log_id,
            path,
            quiet: None,
            state: Mutex::new(LogState {
                file_opt: None,
                pending: header,
                went_quiet: false,
            }),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `"yyyy-MM-dd HH:mm:ss.SSS line\n"`; failures are logged, never raised.
    pub(crate) fn append(&self, line: &str) {
        let text = format_line(Local::now(), line);
        if let Err(error) = self.write_lines(&text) {
            tracing::warn!(path = %self.path.display(), %error, "failed to append to run log");
        }
    }

    /// Writes the pending lines then `text` (empty from the log writer, once the run ended):
    /// to the run's own file, created by the first write, unless the run ended before its
    /// handler wrote a line; then to its second's shared file.
    fn write_lines(&self, text: &str) -> io::Result<()> {
        let mut state = self.lock();
        let ended_quiet = text.is_empty() && !state.pending.is_empty();
        match &self.quiet {
            Some(quiet) if state.file_opt.is_none() && (state.went_quiet || ended_quiet) => {
                let lines = state.pending.take_formatted(text);
                state.went_quiet = true;
                let path = JobLogStore::quiet_path(&self.path, quiet.log_date_ms);
                quiet.files.append(&path, quiet.log_id, &lines)
            }
            _ => state.write(&self.path, text),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a line appended at `at` after the pending ones, for
    /// [`write_pending`](Self::write_pending).
    fn push_pending(&self, at: DateTime<Utc>, line: String) {
        self.lock().pending.push(at, line);
    }

    /// Reads like [`JobLogStore::read`] the file followed by the pending lines, as they will
    /// be once written.
    fn read_lines(&self, from_line: usize, include_unterminated: bool) -> io::Result<LogChunk> {
        let state = self.lock();
        let pending = state.pending.formatted();
        let pending = pending.as_bytes();
        match File::open(&self.path) {
            Ok(file) => read_lines(
                BufReader::new(file.chain(pending)),
                from_line,
                include_unterminated,
            ),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                read_lines(pending, from_line, include_unterminated)
            }
            Err(error) => Err(error),
        }
    }
}

impl writer::PendingLines for RunLog {
    fn log_id(&self) -> i64 {
        self.log_id
    }

    fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the pending lines, once the run ended (the log writer's work).
    fn write_pending(&self) {
        if let Err(error) = self.write_lines("") {
            tracing::warn!(path = %self.path.display(), %error, "failed to write run log");
        }
    }

    fn is_written(&self) -> bool {
        self.lock().pending.is_empty()
    }
}

impl LogState {
    /// Writes the pending lines then `text` (either may be empty), opening the file if needed.
    fn write(&mut self, path: &Path, text: &str) -> io::Result<()> {
        if self.pending.is_empty() {
            if let Some(file) = self.file_opt.as_mut() {
                return file.write_all(text.as_bytes());
            }
            if text.is_empty() {
                return Ok(());
            }
        }
        let file = match &mut self.file_opt {
            Some(file) => file,
            slot @ None => slot.insert(open_append(path)?),
        };
        // The pending lines and this one leave in one write: a run whose handler logs nothing
        // costs one open and one write (its start and end lines).
        let first = self.pending.take_formatted(text);
        file.write_all(first.as_bytes())
    }
}

/// Lines that wait in memory for their file, each with the instant it was appended. They are
/// formatted (the instant in local time) when written, on the log writer's thread: formatting
/// a run's start line there took a tenth of the runtime's CPU at a second's burst of starts.
#[derive(Debug, Default)]
struct WaitingLines(Vec<(DateTime<Utc>, String)>);

impl WaitingLines {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn push(&mut self, at: DateTime<Utc>, line: String) {
        self.0.push((at, line));
    }

    /// The lines as they read in the file.
    fn formatted(&self) -> String {
        let mut text = String::new();
        for (at, line) in &self.0 {
            format_line_into(&mut text, at.with_timezone(&Local), line);
        }
        text
    }

    /// The lines as they read in the file, then `text`; none wait after.
    fn take_formatted(&mut self, text: &str) -> String {
        let mut lines = self.formatted();
        lines.push_str(text);
        self.0.clear();
        lines
    }
}

/// The date folder of a run, [`DATE_DIR_FORMAT`] written field by field (see [`format_line`]).
fn date_dir_name(date: DateTime<Local>) -> String {
    use chrono::Datelike;
    format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
}

/// Formats one log line with its local timestamp, `yyyy-MM-dd HH:mm:ss.SSS line\n`.
pub(crate) fn format_line(now: DateTime<Local>, line: &str) -> String {
    let mut text = String::with_capacity(25 + line.len());
    format_line_into(&mut text, now, line);
    text
}

/// [`format_line`] appended to `text`.
fn format_line_into(text: &mut String, now: DateTime<Local>, line: &str) {
    use chrono::{Datelike, Timelike};
    use std::fmt::Write as _;
    // Written field by field: `DateTime::format` parses its pattern again on every call, a
    // measurable share of a short run's CPU.
    text.reserve(25 + line.len());
    let millis = now.timestamp_subsec_millis().min(999);
    let _ = writeln!(
        text,
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{millis:03} {line}",
        now.year(),
        now.month(),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
    );
}

struct LogChunk {
    content: String,
    line_count: usize,
    /// Whether the file has no line after the last one returned.
    reached_end: bool,
}

fn read_lines(
    mut reader: impl BufRead,
    from_line: usize,
    include_unterminated: bool,
) -> io::Result<LogChunk> {
    let mut line = Vec::new();
    let mut content = Vec::new();
    let mut line_number = 0usize;
    let mut line_count = 0usize;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let terminated = line.last() == Some(&b'\n');
        // A line still being written is counted only once the run is over.
        if !terminated && !include_unterminated {
            break;
        }
        line_number += 1;
        if line_number < from_line {
            continue;
        }
        let over_budget = line_count == MAX_LINES_PER_READ
            || (line_count > 0 && content.len() + line.len() > MAX_BYTES_PER_READ);
        if over_budget {
            return Ok(LogChunk {
                content: String::from_utf8_lossy(&content).into_owned(),
                line_count,
                reached_end: false,
            });
        }
        // A single line larger than the budget is cut rather than never returned.
        line.truncate(MAX_BYTES_PER_READ - 1);
        content.extend_from_slice(&line);
        if content.last() != Some(&b'\n') {
            content.push(b'\n');
        }
        line_count += 1;
    }
    Ok(LogChunk {
        content: String::from_utf8_lossy(&content).into_owned(),
        line_count,
        reached_end: true,
    })
}

/// Whether a folder of the log root is a date folder older than the retention: XXL-JOB's rule,
/// `today 00:00 > folder date + retention days`. Other folders (`callbacklogs`) never expire.
pub(crate) fn is_expired_dir(name: &str, today: NaiveDate, retention_days: u32) -> bool {
    let Ok(date) = NaiveDate::parse_from_str(name, DATE_DIR_FORMAT) else {
        return false;
    };
    date.checked_add_days(chrono::Days::new(u64::from(retention_days)))
        .is_some_and(|expiry| expiry < today)
}

/// Removes the expired date folders under `root`; returns how many were removed.
pub(crate) fn remove_expired(root: &Path, today: NaiveDate, retention_days: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !entry.path().is_dir() || !is_expired_dir(name, today, retention_days) {
            continue;
        }
        match std::fs::remove_dir_all(entry.path()) {
            Ok(()) => removed += 1,
            Err(error) => tracing::warn!(dir = name, %error, "failed to remove expired log dir"),
        }
    }
    removed
}

/// Sweeps expired date folders now and then once a day until `stop` fires.
pub(crate) async fn cleanup_loop(root: PathBuf, retention_days: u32, stop: CancellationToken) {
    const DAY: Duration = Duration::from_secs(24 * 60 * 60);
    loop {
        let sweep_root = root.clone();
        let today = Local::now().date_naive();
        let sweep =
            tokio::task::spawn_blocking(move || remove_expired(&sweep_root, today, retention_days));
        match sweep.await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, retention_days, "removed expired run logs"),
            Err(error) => tracing::warn!(%error, "run log cleanup failed"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(DAY) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_lines(lines: &[String]) -> (tempfile::TempDir, JobLogStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        let log = store.create(7, 0).expect("create log");
        for line in lines {
            log.append(line);
        }
        (dir, store)
    }

    #[test]
    fn hand_written_formats_match_the_patterns() {
        let instants = [0, 1_700_000_000_123, 1_709_251_199_999, 253_402_300_799_000];
        for millis in instants {
            let now = Local
                .timestamp_millis_opt(millis)
                .single()
                .expect("instant");
            let expected = format!("{} hi\n", now.format("%Y-%m-%d %H:%M:%S%.3f"));
            assert_eq!(format_line(now, "hi"), expected);
            assert_eq!(date_dir_name(now), now.format(DATE_DIR_FORMAT).to_string());
        }
    }

    #[test]
    fn date_folder_is_created_by_the_first_line_and_again_after_removal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        let log = store.lazy(3, 0, "start");
        assert!(
            !log.path().exists(),
            "nothing is created before a line is written"
        );
        log.append("end");
        let content = std::fs::read_to_string(log.path()).expect("read");
        let lines: Vec<&str> = content.lines().collect();
        assert!(lines.len() == 2 && lines[0].ends_with(" start") && lines[1].ends_with(" end"));
        // The retention sweep removes whole date folders; the next run's file brings it back.
        std::fs::remove_dir_all(log.path().parent().expect("date folder")).expect("rm");
        let again = store.create(4, 0).expect("recreate date folder");
        again.append("line");
        assert_eq!(store.read(4, 0, 1, false).to_line, 1);
    }

    /// Every read a client can make of run 3's log: from each line, active or not.
    fn all_reads(store: &JobLogStore) -> Vec<pb::ReadLogResponse> {
        (1..=5)
            .flat_map(|from| [true, false].map(|active| store.read(3, 0, from, active)))
            .collect()
    }

    /// The lines of run `log_id` (filed at instant 0) on disk: its own file or its record.
    fn written_lines(store: &JobLogStore, log_id: i64) -> Vec<String> {
        let content = store.on_disk(log_id, 0).expect("the run's lines on disk");
        content.lines().map(str::to_owned).collect()
    }

    /// A waiting line is written with the instant it was appended, not the instant the writer
    /// got to it.
    #[test]
    fn waiting_lines_keep_the_instant_they_were_appended() {
        let appended = Utc
            .timestamp_millis_opt(1_767_323_045_678)
            .single()
            .expect("valid instant");
        let mut waiting = WaitingLines::default();
        waiting.push(appended, "run start".to_owned());
        waiting.push(
            appended + chrono::Duration::milliseconds(5),
            "run end".to_owned(),
        );
        let expected = format!(
            "{}{}",
            format_line(appended.with_timezone(&Local), "run start"),
            format_line(
                (appended + chrono::Duration::milliseconds(5)).with_timezone(&Local),
                "run end"
            )
        );
        assert_eq!(waiting.formatted(), expected);
        assert_eq!(
            waiting.take_formatted("next\n"),
            format!("{expected}next\n")
        );
        assert!(waiting.is_empty());
    }

    /// A log as the runner leaves it for the writer (its lines pending, registered), which the
    /// writer has not got to.
    fn queued_for_the_writer(store: &JobLogStore, log: &Arc<RunLog>, line: &str) {
        log.push_pending(Utc::now(), line.to_owned());
        store.writer.register(log);
    }

    #[test]
    fn a_read_writes_the_lines_waiting_for_the_writer_before_answering() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        // A run whose handler logged nothing: its start and end lines are both in memory.
        let log = Arc::new(store.lazy(3, 0, "start"));
        queued_for_the_writer(&store, &log, "end");
        assert!(!log.path().exists(), "not written yet");
        let first = store.read(3, 0, 1, false);
        // The read says the run is over (the probe's "ran it"): the file holds it already, so
        // a kill of the process right after cannot make the run look never seen.
        assert_eq!((first.from_line, first.to_line, first.is_end), (1, 2, true));
        assert_eq!(written_lines(&store, 3).join("\n") + "\n", first.content);
        assert!(
            !log.path().exists(),
            "a run that logged nothing has no file of its own"
        );
        assert!(
            store.writer.unwritten(log.log_id, log.path()).is_none(),
            "unregistered"
        );
        let lines: Vec<&str> = first.content.lines().collect();
        assert!(lines.len() == 2 && lines[0].ends_with(" start") && lines[1].ends_with(" end"));
        assert_eq!(all_reads(&store)[1], first, "same read from the file");
    }

    #[test]
    fn an_end_line_after_handler_lines_keeps_its_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        let log = Arc::new(store.lazy(3, 0, "start"));
        log.append("handler line");
        queued_for_the_writer(&store, &log, "end");
        // A handler that outlived its run: its line goes after the end line.
        log.append("late line");
        let before = all_reads(&store);
        let all = &before[1];
        assert_eq!((all.to_line, all.is_end), (4, true));
        let lines = written_lines(&store, 3);
        assert!(
            log.path().exists(),
            "a run that logged has a file of its own"
        );
        let suffixes = [" start", " handler line", " end", " late line"];
        assert_eq!(lines.len(), suffixes.len());
        for (line, suffix) in lines.iter().zip(suffixes) {
            assert!(
                line.ends_with(suffix),
                "{line:?} should end with {suffix:?}"
            );
        }
        assert_eq!(all_reads(&store), before);
    }

    /// Hands `log` to the writer with `line`; what follows reads the file as it is then and
    /// sends it on `seen_tx`.
    fn append_and_watch(
        store: &JobLogStore,
        (log_id, log): (i64, &Arc<RunLog>),
        line: &str,
        seen_tx: &std::sync::mpsc::Sender<String>,
    ) {
        let (on_disk, seen_tx) = (store.clone(), seen_tx.clone());
        store.append_later(log, line, move || {
            let content = on_disk.on_disk(log_id, 0).unwrap_or_default();
            let _ = seen_tx.send(content);
        });
    }

    #[tokio::test]
    async fn the_writer_writes_lines_in_order_before_what_follows_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        let log = Arc::new(store.lazy(3, 0, "start"));
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        append_and_watch(&store, (3, &log), "end 1", &seen_tx);
        append_and_watch(&store, (3, &log), "end 2", &seen_tx);
        tokio::time::timeout(Duration::from_secs(10), store.drain())
            .await
            .expect("the writer drains within 10 s");
        let seen: Vec<String> = seen_rx.try_iter().collect();
        assert_eq!(seen.len(), 2, "each line's follow-up ran once: {seen:?}");
        // The writer may find both lines pending when it takes the first log: each follow-up
        // must see at least its own line.
        assert!(
            seen[0].lines().any(|line| line.ends_with(" end 1")),
            "{seen:?}"
        );
        assert!(
            seen[1].lines().any(|line| line.ends_with(" end 2")),
            "{seen:?}"
        );
        let lines = written_lines(&store, 3);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with(" start"));
        assert!(store.writer.unwritten(log.log_id, log.path()).is_none());
    }

    /// The writer waits for pending starts once per batch, not before each log: runs that
    /// keep arriving would otherwise hold it back log by log. Here the writer waits for one
    /// run to start; the first log's follow-up then queues another (it takes a ticket and
    /// keeps it), and the second log, queued with the first, is written all the same.
    #[test]
    fn the_writer_waits_for_starts_once_per_batch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::with_hold_back(dir.path(), Duration::from_secs(60));
        let gate = store.writer_gate();
        gate.pause();
        let (first, second) = (
            Arc::new(store.lazy(1, 0, "start")),
            Arc::new(store.lazy(2, 0, "start")),
        );
        let (kept_tx, kept_rx) = std::sync::mpsc::channel();
        let later_store = store.clone();
        store.append_later(&first, "end", move || {
            let _ = kept_tx.send(later_store.start_ticket());
        });
        let (written_tx, written_rx) = std::sync::mpsc::channel();
        store.append_later(&second, "end", move || {
            let _ = written_tx.send(());
        });
        let starting = store.start_ticket();
        gate.resume();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.writer_waits_for_starts() == 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(store.writer_waits_for_starts(), 1, "the writer waits");
        drop(starting);
        let kept = kept_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the first log written once the run started");
        written_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the second log written without a second wait");
        assert_eq!(store.writer_waits_for_starts(), 1);
        assert_eq!(written_lines(&store, 2).len(), 2, "its start and end lines");
        drop(kept);
    }

    #[tokio::test]
    async fn drain_waits_for_every_log_handed_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        let gate = store.writer_gate();
        gate.pause();
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let logs: Vec<(i64, Arc<RunLog>)> = (1..=200)
            .map(|log_id| {
                let log = Arc::new(store.lazy(log_id, 0, "start"));
                append_and_watch(&store, (log_id, &log), "end", &seen_tx);
                (log_id, log)
            })
            .collect();
        assert!(
            seen_rx.try_recv().is_err(),
            "the paused writer wrote nothing"
        );
        gate.resume();
        tokio::time::timeout(Duration::from_secs(10), store.drain())
            .await
            .expect("the writer drains within 10 s");
        assert_eq!(seen_rx.try_iter().count(), logs.len());
        for (log_id, log) in &logs {
            assert!(store.writer.unwritten(log.log_id, log.path()).is_none());
            let lines = written_lines(&store, *log_id);
            assert!(lines.len() == 2 && lines[1].ends_with(" end"), "{lines:?}");
        }
    }

    #[tokio::test]
    async fn an_abandoned_writer_neither_writes_nor_reports_what_waits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        let gate = store.writer_gate();
        gate.pause();
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let log = Arc::new(store.lazy(1, 0, "start"));
        append_and_watch(&store, (1, &log), "end", &seen_tx);
        // The process dies (kill -9) while the writer is behind.
        store.abandon();
        gate.resume();
        tokio::time::timeout(Duration::from_secs(10), store.drain())
            .await
            .expect("the writer drains within 10 s");
        assert!(seen_rx.try_recv().is_err(), "nothing reported");
        assert_eq!(store.on_disk(1, 0), None, "nothing written");
    }

    #[test]
    fn runs_that_logged_nothing_share_their_seconds_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::inline(dir.path());
        let second_ms = 1_700_000_000_000;
        // Two runs filed in one second, one in the next; none of their handlers wrote a line.
        for (log_id, log_date_ms) in [(1, second_ms), (2, second_ms + 999), (3, second_ms + 1_000)]
        {
            let log = Arc::new(store.lazy(log_id, log_date_ms, format!("start {log_id}")));
            store.append_later(&log, format!("end {log_id}"), || {});
            assert!(!log.path().exists(), "run {log_id} has no file of its own");
        }
        let date_dir = store.path_for(1, second_ms);
        let date_dir = date_dir.parent().expect("date folder");
        let mut files: Vec<String> = std::fs::read_dir(date_dir)
            .expect("date folder")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        files.sort();
        assert_eq!(files.len(), 2, "one shared file per second: {files:?}");
        for (log_id, log_date_ms) in [(1, second_ms), (2, second_ms + 999), (3, second_ms + 1_000)]
        {
            let read = store.read(log_id, log_date_ms, 1, false);
            let lines: Vec<&str> = read.content.lines().collect();
            assert_eq!((read.to_line, read.is_end), (2, true), "{read:?}");
            assert!(lines[0].ends_with(&format!(" start {log_id}")), "{lines:?}");
            assert!(lines[1].ends_with(&format!(" end {log_id}")), "{lines:?}");
            assert_eq!(
                store.read(log_id, log_date_ms, 2, false).content,
                format!("{}\n", lines[1])
            );
        }
        // A run the shared file does not hold reads as a missing file, as before.
        let unknown = store.read(4, second_ms, 1, false);
        assert_eq!(unknown.to_line, 0);
        assert!(
            unknown.content.starts_with("log file not found: "),
            "{unknown:?}"
        );
    }

    #[test]
    fn a_line_written_after_a_quiet_run_ended_follows_its_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::inline(dir.path());
        let log = Arc::new(store.lazy(3, 0, "start"));
        store.append_later(&log, "end", || {});
        // A handler that outlived its run, having logged nothing during it.
        log.append("late line");
        assert!(!log.path().exists(), "still no file of its own");
        let lines = written_lines(&store, 3);
        let suffixes = [" start", " end", " late line"];
        assert_eq!(lines.len(), suffixes.len(), "{lines:?}");
        for (line, suffix) in lines.iter().zip(suffixes) {
            assert!(
                line.ends_with(suffix),
                "{line:?} should end with {suffix:?}"
            );
        }
        assert_eq!(store.read(3, 0, 1, false).to_line, 3);
    }

    #[test]
    fn rolling_read_returns_new_lines_from_the_given_line() {
        let lines: Vec<String> = (1..=5).map(|n| format!("line {n}")).collect();
        let (_dir, store) = store_with_lines(&lines);

        let first = store.read(7, 0, 0, true);
        assert_eq!((first.from_line, first.to_line), (1, 5));
        assert_eq!(first.content.lines().count(), 5);
        assert!(
            first
                .content
                .lines()
                .next()
                .is_some_and(|l| l.ends_with(" line 1"))
        );
        assert!(!first.is_end, "an active run is never at its end");

        let tail = store.read(7, 0, 3, true);
        assert_eq!((tail.from_line, tail.to_line), (3, 5));
        assert!(
            tail.content
                .lines()
                .next()
                .is_some_and(|l| l.ends_with(" line 3"))
        );

        let nothing_new = store.read(7, 0, 6, true);
        assert_eq!((nothing_new.to_line, nothing_new.content.as_str()), (5, ""));

        let finished = store.read(7, 0, 6, false);
        assert!(finished.is_end);
        let finished_from_start = store.read(7, 0, 1, false);
        assert!(finished_from_start.is_end);
    }

    #[test]
    fn read_is_bounded_by_lines_then_continues() {
        let lines: Vec<String> = (1..=1500).map(|n| format!("line {n}")).collect();
        let (_dir, store) = store_with_lines(&lines);
        let first = store.read(7, 0, 1, false);
        assert_eq!(first.to_line, 1000);
        assert!(!first.is_end, "lines remain after a bounded read");
        let second = store.read(7, 0, first.to_line + 1, false);
        assert_eq!((second.from_line, second.to_line), (1001, 1500));
        assert!(second.is_end);
    }

    #[test]
    fn read_is_bounded_by_bytes() {
        let big = "x".repeat(4000);
        let lines = vec![big; 400];
        let (_dir, store) = store_with_lines(&lines);
        let first = store.read(7, 0, 1, false);
        assert!(first.content.len() <= MAX_BYTES_PER_READ);
        assert!(first.to_line > 0 && first.to_line < 400);
        assert!(!first.is_end);
        let second = store.read(7, 0, first.to_line + 1, false);
        assert_eq!(second.to_line, 400);
        assert!(second.is_end);
    }

    #[test]
    fn missing_file_is_reported_and_at_its_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        let response = store.read(99, 0, 4, false);
        assert!(response.is_end);
        assert_eq!((response.from_line, response.to_line), (4, 3));
        assert!(response.content.starts_with("log file not found: "));
        assert!(response.content.ends_with("99.log"));
    }

    #[test]
    fn unterminated_last_line_is_returned_only_after_the_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = JobLogStore::new(dir.path());
        let path = store.path_for(1, 0);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, "one\ntwo").expect("write");
        assert_eq!(store.read(1, 0, 1, true).to_line, 1);
        let done = store.read(1, 0, 1, false);
        assert_eq!(
            (done.to_line, done.content.as_str(), done.is_end),
            (2, "one\ntwo\n", true)
        );
    }

    #[test]
    fn date_folders_expire_after_the_retention() {
        let today = NaiveDate::from_ymd_opt(2024, 3, 31).expect("date");
        assert!(is_expired_dir("2024-03-20", today, 10));
        assert!(!is_expired_dir("2024-03-21", today, 10));
        assert!(!is_expired_dir("callbacklogs", today, 10));

        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["2024-03-01", "2024-03-30", "callbacklogs"] {
            std::fs::create_dir_all(dir.path().join(name)).expect("mkdir");
        }
        assert_eq!(remove_expired(dir.path(), today, 3), 1);
        assert!(!dir.path().join("2024-03-01").exists());
        assert!(dir.path().join("2024-03-30").exists());
        assert!(dir.path().join("callbacklogs").exists());
    }

    #[test]
    fn cleanup_removes_only_date_folders_older_than_the_retention() {
        let today = NaiveDate::from_ymd_opt(2024, 3, 1).expect("date");
        let dir = tempfile::tempdir().expect("tempdir");
        // 2024 is a leap year: 2024-02-23 + 7 days = 2024-03-01, today, so it is kept.
        let expired = ["2024-02-22", "2023-12-31"];
        let kept = [
            "2024-02-23",
            "2024-03-01",
            "2024-03-02",
            "gluesource",
            "callbacklogs",
            "2024-13-01",
            "not-a-date",
        ];
        for name in expired.iter().chain(&kept) {
            std::fs::create_dir_all(dir.path().join(name)).expect("mkdir");
            std::fs::write(dir.path().join(name).join("1.log"), "line\n").expect("write");
        }
        // A file named like an old date folder is not a folder: left alone.
        std::fs::write(dir.path().join("2020-01-01"), "not a folder").expect("write");

        assert_eq!(remove_expired(dir.path(), today, 7), expired.len());
        for name in expired {
            assert!(!dir.path().join(name).exists(), "{name} should be removed");
        }
        for name in kept {
            assert!(dir.path().join(name).join("1.log").exists(), "{name} kept");
        }
        assert!(dir.path().join("2020-01-01").is_file());
        assert_eq!(remove_expired(dir.path(), today, 7), 0, "idempotent");
        assert_eq!(remove_expired(&dir.path().join("missing"), today, 7), 0);
    }
}
