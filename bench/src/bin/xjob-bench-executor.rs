//! The benchmark's remote executor: a no-op handler whose first statement records
//! `(job_id, scheduled_at_ms, start_ms)` and the run's log id (a fourth field that readers of
//! the three figures skip; the campaign shows it for an occurrence run twice). Records stay in memory and are written to the file
//! named on the command line when the process gets SIGTERM or Ctrl-C, so recording costs
//! nothing measurable during the window.
//!
//! ```text
//! xjob-bench-executor ADMIN_URL[,ADMIN_URL…] BIND_ADDR RECORDS_FILE
//! ```
//!
//! With several admins (a cluster), the executor connects to the first one that answers and
//! moves down the list when its session ends.
//!
//! The fault campaign kills executors with SIGKILL, which would take the in-memory records
//! with them: with `XJOB_BENCH_RECORD_EACH=1` each record is appended to the file as the
//! handler starts (one `write` of a whole line; the kernel keeps it when the process dies),
//! and a restarted executor appends to the same file. `XJOB_BENCH_ADVERTISE` sets the address
//! the admins dial (the campaign's fault proxy in front of the executor).
//!
//! A third handler, `fail`, records its start like `noop` and fails (the campaign's
//! workflows' error branch).
//!
//! A second handler, `slow`, stands for work that takes a while (the campaign's overlap
//! policy jobs): its parameters `STEP_MS:D1,D2,…` make the occurrence at `scheduled_at_ms`
//! take `D[(scheduled_at_ms / STEP_MS) % len]` milliseconds (cut short when the run is killed).
//! It records its start like `noop` and, with `XJOB_BENCH_RECORD_EACH=1`, a line
//! `end JOB_ID SCHEDULED_AT_MS END_MS` as it returns, so the harness sees which runs of a job
//! were going at the same time (record readers that want three numbers skip that line).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use xjob_executor::{Executor, JobContext, JobError, JobOutput, JobResult};

type Records = Arc<Mutex<Vec<(i64, i64, i64, i64)>>>;

/// Where each handler start goes: memory (written at exit) or straight to the file.
#[derive(Clone)]
enum Recorder {
    AtExit(Records),
    Each(Arc<Mutex<std::fs::File>>),
}

impl Recorder {
    fn open(path: &str) -> anyhow::Result<Recorder> {
        if std::env::var_os("XJOB_BENCH_RECORD_EACH").is_none() {
            return Ok(Recorder::AtExit(Arc::new(Mutex::new(Vec::with_capacity(
                1 << 20,
            )))));
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| anyhow::anyhow!("cannot open {path}: {error}"))?;
        Ok(Recorder::Each(Arc::new(Mutex::new(file))))
    }

    fn record(&self, ctx: &JobContext, start_ms: i64) {
        let (job_id, scheduled_at_ms, log_id) = (ctx.job_id(), ctx.scheduled_at_ms(), ctx.log_id());
        match self {
            Recorder::AtExit(records) => {
                if let Ok(mut records) = records.lock() {
                    records.push((job_id, scheduled_at_ms, start_ms, log_id));
                }
            }
            Recorder::Each(file) => {
                // One write per line: a kill between two records loses neither.
                let line = format!("{job_id} {scheduled_at_ms} {start_ms} {log_id}\n");
                if let Ok(mut file) = file.lock()
                    && let Err(error) = file.write_all(line.as_bytes())
                {
                    eprintln!("cannot append a record: {error}");
                }
            }
        }
    }

    /// A `slow` run's end (kept only in the file: only the campaign, which records each,
    /// runs slow handlers).
    fn record_end(&self, job_id: i64, scheduled_at_ms: i64, end_ms: i64) {
        if let Recorder::Each(file) = self {
            let line = format!("end {job_id} {scheduled_at_ms} {end_ms}\n");
            if let Ok(mut file) = file.lock()
                && let Err(error) = file.write_all(line.as_bytes())
            {
                eprintln!("cannot append an end record: {error}");
            }
        }
    }

    fn finish(&self, path: &str) -> std::io::Result<()> {
        match self {
            Recorder::AtExit(records) => write_records(path, records),
            Recorder::Each(_) => Ok(()),
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => return std::future::pending().await,
        };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn write_records(path: &str, records: &Records) -> std::io::Result<()> {
    let records = records
        .lock()
        .map_err(|_| std::io::Error::other("records lock poisoned"))?;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    for (job_id, scheduled_at_ms, start_ms, log_id) in records.iter() {
        writeln!(file, "{job_id} {scheduled_at_ms} {start_ms} {log_id}")?;
    }
    file.flush()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [admins, bind, records_path] = args.as_slice() else {
        anyhow::bail!("usage: xjob-bench-executor ADMIN_URL[,ADMIN_URL…] BIND_ADDR RECORDS_FILE");
    };
    let admin_addrs = admin_list(admins);
    if admin_addrs.is_empty() {
        anyhow::bail!("no admin address in '{admins}'");
    }
    let recorder = Recorder::open(records_path)?;
    let recording = recorder.clone();
    let handler = move |ctx: JobContext| {
        let start_ms = now_ms();
        recording.record(&ctx, start_ms);
        async { JobResult::Ok(JobOutput::default()) }
    };
    let slow_recording = recorder.clone();
    let slow = move |ctx: JobContext| {
        let recording = slow_recording.clone();
        async move {
            let (job_id, scheduled_at_ms) = (ctx.job_id(), ctx.scheduled_at_ms());
            recording.record(&ctx, now_ms());
            let length = slow_length(ctx.params(), scheduled_at_ms);
            tokio::select! {
                _ = tokio::time::sleep(length) => {}
                _ = ctx.cancelled() => {}
            }
            recording.record_end(job_id, scheduled_at_ms, now_ms());
            JobResult::Ok(JobOutput::default())
        }
    };
    let fail_recording = recorder.clone();
    let fail = move |ctx: JobContext| {
        fail_recording.record(&ctx, now_ms());
        async { JobResult::Err(JobError::new("the campaign's failing step")) }
    };
    let log_dir = run_log_root().join(format!("xjob-bench-executor-{}", std::process::id()));
    let mut builder = Executor::builder()
        .app_name("xjob-bench")
        .admin_addrs(admin_addrs)
        .bind(bind.clone())
        .log_dir(&log_dir)
        .handler("noop", handler)
        .handler("slow", slow)
        .handler("fail", fail);
    if let Ok(advertised) = std::env::var("XJOB_BENCH_ADVERTISE") {
        builder = builder.advertise_address(advertised);
    }
    // Session dispatch: no port; the runs come down the executor's session (the bind address
    // then only names it).
    if std::env::var("XJOB_BENCH_DISPATCH").is_ok_and(|mode| mode == "session") {
        let name = bind.replace([':', '.'], "-");
        builder = builder
            .session_dispatch(true)
            .advertise_address(format!("session://xjob-bench-{name}"));
    }
    builder.run(shutdown_signal()).await?;
    // The run logs stay: the harness deletes their directory once every executor has exited
    // (a million files take longer to delete than it waits for an executor to exit).
    recorder.finish(records_path)?;
    Ok(())
}

/// Where the run log files go: the directory the harness made for them (`XJOB_BENCH_RUN_LOGS`,
/// on a tmpfs; it deletes it after the run), else the temporary directory.
fn run_log_root() -> std::path::PathBuf {
    std::env::var_os("XJOB_BENCH_RUN_LOGS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// How long a `slow` run of the occurrence at `scheduled_at_ms` takes, from its parameters
/// `STEP_MS:D1,D2,…`; zero when they do not parse.
fn slow_length(params: &str, scheduled_at_ms: i64) -> std::time::Duration {
    let parsed = params.split_once(':').and_then(|(step, lengths)| {
        let step: i64 = step.trim().parse().ok().filter(|step| *step > 0)?;
        let lengths: Vec<u64> = lengths
            .split(',')
            .map(|length| length.trim().parse().ok())
            .collect::<Option<_>>()?;
        let index = (scheduled_at_ms.div_euclid(step) as usize) % lengths.len().max(1);
        lengths.get(index).copied()
    });
    std::time::Duration::from_millis(parsed.unwrap_or(0))
}

/// The comma-separated admin addresses, blanks dropped.
fn admin_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|addr| !addr.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_addresses_are_a_comma_separated_list() {
        assert_eq!(
            admin_list("http://a:1,http://b:2, http://c:3,"),
            ["http://a:1", "http://b:2", "http://c:3"]
        );
        assert!(admin_list(" , ").is_empty());
    }

    #[test]
    fn a_slow_run_takes_the_length_of_its_step() {
        let ms = |params, at| slow_length(params, at).as_millis();
        assert_eq!(ms("2000:2500,0", 4000), 2500);
        assert_eq!(ms("2000:2500,0", 6000), 0);
        assert_eq!(ms("2000:2500,0", 8000), 2500);
        assert_eq!(ms("nonsense", 8000), 0);
        assert_eq!(ms("0:100", 8000), 0);
    }
}
