//! The callback batch split: results that each fit the admin's `max_request_bytes` but not
//! together are refused as one batch (OUT_OF_RANGE) and must be sent again in smaller batches,
//! whole, not cut.
//!
//! To have them pending together, whatever the SDK's batching window: the admin dispatches a
//! sleeping run and three failing runs queued behind it (SERIAL), then is frozen (SIGSTOP, its
//! sockets stay open, calls to it just wait) until the executor's run log files show all four
//! ended; each SDK has at most one callback call in flight, so at least two of the large results
//! wait together for the next batch. Thawed (SIGCONT), the admin refuses that batch as too large.

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use xjob_proto::pb;

use super::admin::MAX_REQUEST_BYTES;
use super::world::{RUN_BOUND, World, expect_status};
use crate::wait_until;

/// Three failing runs whose results ("failed on purpose: " + params) each take more than half
/// of the admin's limit: any two in one batch are refused.
const FAILING_RUNS: usize = 3;

/// How long the sleeping run at the head of the job's queue takes: time to dispatch the three
/// failing runs behind it before the admin is frozen.
const SLEEP_MS: u64 = 2500;

pub async fn callback_batch_split(world: &mut World) -> anyhow::Result<()> {
    let app = world.app_name("split");
    let group = world.create_group(&app).await?;
    let index = world.start_executor(&app).await?;
    let log_dir = world.executors[index].env.log_dir.clone();
    let job_id = world.create_job(World::job(group, "sleep")).await?;
    let sleeper = world.trigger_one(job_id, &SLEEP_MS.to_string()).await?;
    world.wait_running_with(sleeper, "sleeping").await?;
    // The same job (SERIAL: its runs queue behind the sleeper) now fails with its params.
    let mut job = world
        .client
        .get_job(pb::GetJobRequest { id: job_id })
        .await?
        .into_inner()
        .job
        .ok_or_else(|| anyhow::anyhow!("GetJob returned no job"))?;
    job.handler = "fail".to_string();
    world
        .client
        .update_job(pb::UpdateJobRequest { job: Some(job) })
        .await?;
    let params = "y".repeat(MAX_REQUEST_BYTES / 2 + 512);
    let mut failing = Vec::new();
    for _ in 0..FAILING_RUNS {
        failing.push(world.trigger_one(job_id, &params).await?);
    }
    for log_id in &failing {
        wait_until(
            RUN_BOUND,
            &format!("run {log_id} accepted by the executor"),
            || async {
                let log = world.get_log(*log_id).await.ok()?;
                (log.status == pb::RunStatus::Running as i32 && log.trigger_code == 200)
                    .then_some(())
            },
        )
        .await?;
    }
    let pid = world
        .admin
        .pid()
        .ok_or_else(|| anyhow::anyhow!("the admin is not running"))?;
    let frozen = Frozen::new(pid)?;
    anyhow::ensure!(
        !run_ended(&log_dir, sleeper),
        "the sleeping run ended before the admin was frozen (the machine is too slow for \
         {SLEEP_MS} ms): its results could not be held back together"
    );
    let mut all = failing.clone();
    all.push(sleeper);
    wait_until(
        Duration::from_secs(15),
        "the four runs to end while the admin is frozen",
        || async {
            all.iter()
                .all(|log_id| run_ended(&log_dir, *log_id))
                .then_some(())
        },
    )
    .await?;
    drop(frozen);
    let expected = format!("failed on purpose: {params}");
    for log_id in failing {
        let log = world.wait_final(log_id, RUN_BOUND).await?;
        expect_status(&log, pb::RunStatus::Failed, 500)?;
        anyhow::ensure!(
            log.handle_msg == expected,
            "run {log_id}: its result should arrive whole (split batches, not cut messages); \
             handle_msg has {} of {} bytes",
            log.handle_msg.len(),
            expected.len()
        );
    }
    let log = world.wait_final(sleeper, RUN_BOUND).await?;
    expect_status(&log, pb::RunStatus::Success, 200)
}

/// Whether the run's log has its end line: its own file `{log_dir}/{date}/{log_id}.log` (every
/// SDK), or, for a run that logged nothing on the Rust SDK, its record in the shared file of
/// its second, `{date}/runs-{HHmmss}.log` (records `{log_id} {byte length}\n{lines}`).
fn run_ended(log_dir: &Path, log_id: i64) -> bool {
    let Ok(days) = std::fs::read_dir(log_dir) else {
        return false;
    };
    days.flatten().any(|day| {
        let own = std::fs::read_to_string(day.path().join(format!("{log_id}.log")));
        if own.is_ok_and(|content| content.contains("run end:")) {
            return true;
        }
        let Ok(files) = std::fs::read_dir(day.path()) else {
            return false;
        };
        files.flatten().any(|file| {
            let name = file.file_name().to_string_lossy().into_owned();
            name.starts_with("runs-")
                && std::fs::read(file.path()).is_ok_and(|bytes| shared_record_ended(&bytes, log_id))
        })
    })
}

/// Whether a shared file of quiet runs holds a whole record of `log_id` with its end line.
fn shared_record_ended(mut bytes: &[u8], log_id: i64) -> bool {
    while let Some(newline) = bytes.iter().position(|byte| *byte == b'\n') {
        let header = String::from_utf8_lossy(&bytes[..newline]).into_owned();
        let Some((id, length)) = header.split_once(' ') else {
            return false;
        };
        let (Ok(id), Ok(length)) = (id.parse::<i64>(), length.parse::<usize>()) else {
            return false;
        };
        let Some(record) = bytes.get(newline + 1..newline + 1 + length) else {
            return false;
        };
        if id == log_id && String::from_utf8_lossy(record).contains("run end:") {
            return true;
        }
        bytes = &bytes[newline + 1 + length..];
    }
    false
}

/// The admin stopped with SIGSTOP until dropped (SIGCONT), so a failing scenario never leaves
/// it frozen for the next.
struct Frozen(Pid);

impl Frozen {
    fn new(pid: u32) -> anyhow::Result<Frozen> {
        let pid = Pid::from_raw(i32::try_from(pid)?);
        kill(pid, Signal::SIGSTOP)?;
        Ok(Frozen(pid))
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}
