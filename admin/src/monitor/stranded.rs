//! Runs a dead admin claimed but never sent: delivered, exactly once.
//!
//! An admin claims a second's fires about 200 ms before it (PENDING → RUNNING) and records
//! where each went only after sending it. Killed in between, it leaves RUNNING runs with no
//! address ("stranded"). The lost-run monitor asks every executor that may have received one
//! (`lost::probe_stranded`); when all of them say they never saw it, this module takes it over
//! and sends it:
//!
//! ```text
//! stranded, never seen ─▶ store.adopt_stranded (fenced: still RUNNING, unsent, owner gone)
//!   ─▶ too late for a DO_NOTHING job (misfire rules) ─▶ SKIPPED with the reason
//!   ─▶ otherwise ─▶ Trigger::dispatch(Fires::Adopted) ─▶ route, Run, record
//! ```
//! Exactly once: the take-over is a conditional write, so of two admins finding the same run
//! only one changes it; the executors refuse a log id they already ran; and a run any executor
//! may hold is never sent again (it is judged by the lost-run rules instead).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::context::AdminContext;
use crate::error::Error;
use crate::model::{Fire, Job, JobId, LogId, MisfireStrategy, NodeIdentity, RunLog};
use crate::trigger::Fires;

/// The reason recorded on a stranded run too late for its DO_NOTHING job.
pub const LATE_REASON: &str = "misfire: claimed by an admin that stopped before sending it, and \
     found unsent too late; DO_NOTHING skips it";

/// What becomes of one stranded run this admin took over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Send,
    /// Too late for its DO_NOTHING job (the misfire rules, as for adopted PENDING fires).
    SkipLate,
    /// Its job was deleted meanwhile.
    SkipJobless,
}

/// Decides what becomes of an adopted stranded run (pure); `strategy` is its job's misfire
/// strategy, `None` when the job is gone.
pub fn fate_of(
    run: &RunLog,
    strategy: Option<MisfireStrategy>,
    now_ms: i64,
    threshold_ms: i64,
) -> Fate {
    let Some(strategy) = strategy else {
        return Fate::SkipJobless;
    };
    match crate::model::skipped_as_misfire(run.into(), strategy, now_ms, threshold_ms) {
        Some(_) => Fate::SkipLate,
        None => Fate::Send,
    }
}

/// What gives this admin the right to take stranded runs over.
#[derive(Debug, Clone, Copy)]
pub enum TakeOver<'a> {
    /// Their owner's lease lapsed by `lease_now_ms`, the database's clock
    /// (`Store::database_now_ms`) the leases are judged by: `Store::adopt_stranded`.
    LeaseLapsed { lease_now_ms: i64 },
    /// Their owner's liveness lock was released, and every executor that could have received
    /// them never did and now refuses them from that owner: `Store::adopt_fenced`.
    Fenced { owner: &'a NodeIdentity },
}

/// Takes over `runs` (stranded, received by no executor) and sends them, or records them
/// skipped by the misfire rules; this admin's clock only dates the new dispatch.
pub async fn send(ctx: &AdminContext, runs: Vec<RunLog>, how: TakeOver<'_>) -> Result<(), Error> {
    let now = ctx.clock.now_ms();
    let ids: Vec<LogId> = runs.iter().map(|run| run.id).collect();
    let claimed_at = ctx.trigger.lease_mark();
    let adopted = match how {
        TakeOver::LeaseLapsed { lease_now_ms } => {
            ctx.store
                .adopt_stranded(&ids, &ctx.node, now, lease_now_ms)
                .await?
        }
        TakeOver::Fenced { owner } => ctx.store.adopt_fenced(&ids, owner, &ctx.node, now).await?,
    };
    if adopted.is_empty() {
        return Ok(());
    }
    tracing::debug!(ids = ?adopted.iter().map(|run| run.id.0).collect::<Vec<_>>(), ?how,
        "took over stranded runs");
    // From here the rows are this live node's: nobody else sends or judges them, so every
    // write below is retried until it lands.
    let job_ids: Vec<JobId> = adopted.iter().map(|run| run.job_id).collect();
    let jobs: HashMap<JobId, Arc<Job>> = retried(ctx, "reading the jobs of stranded runs", || {
        ctx.store.get_jobs(&job_ids)
    })
    .await?;
    let threshold = ctx.config.misfire_threshold.as_millis() as i64;
    let (mut fires, mut late, mut jobless) = (Vec::new(), Vec::new(), Vec::new());
    for run in &adopted {
        let job = jobs.get(&run.job_id);
        match fate_of(run, job.map(|job| job.misfire_strategy), now, threshold) {
            Fate::Send => {
                if let Some(job) = job {
                    fires.push(Fire::from_run(run, Arc::clone(job)));
                }
            }
            Fate::SkipLate => late.push(run),
            Fate::SkipJobless => jobless.push(run),
        }
    }
    tracing::info!(
        sent = fires.len(),
        skipped_late = late.len(),
        skipped_jobless = jobless.len(),
        "took over runs a stopped admin claimed but never sent"
    );
    for (runs, reason) in [
        (late, LATE_REASON),
        (jobless, "the job was deleted before this run was sent"),
    ] {
        if !runs.is_empty() {
            let ids: Vec<LogId> = runs.iter().map(|run| run.id).collect();
            retried(ctx, "recording skipped stranded runs", || async {
                ctx.store
                    .skip_adopted_stranded(&ids, &ctx.node, reason, now)
                    .await
                    .map_err(Error::from)
            })
            .await?;
            crate::metrics::dispatched(crate::metrics::Dispatch::Skipped, runs.len() as u64);
            for run in runs {
                crate::telemetry::record_unsent(run.into(), "skipped", reason);
            }
        }
    }
    if !fires.is_empty() {
        ctx.trigger
            .dispatch(Fires::Adopted {
                fires,
                trigger_time_ms: now,
                claimed_at,
            })
            .await?;
    }
    Ok(())
}

/// Retries a database call with a growing pause until it answers, or until the admin shuts
/// down (then the last error: the runs stay this node's, and are taken over once it stopped).
async fn retried<T, E, F, Fut>(ctx: &AdminContext, what: &str, mut call: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display + Into<Error>,
{
    let mut delay = Duration::from_millis(100);
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(error) => {
                tracing::warn!(%error, what, "retrying");
                tokio::select! {
                    _ = ctx.tasks.stopping().cancelled() => return Err(error.into()),
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GroupId;
    use crate::model::{RunStatus, TriggerType};

    const NOW: i64 = 1_800_000_000_000;

    fn stranded(scheduled_at_ms: i64, trigger_type: TriggerType) -> RunLog {
        RunLog {
            id: LogId(7),
            job_id: JobId(1),
            group_id: GroupId(1),
            fire_key: None,
            status: RunStatus::Running,
            trigger_type,
            scheduled_at_ms,
            trigger_time_ms: scheduled_at_ms - 200,
            trigger_code: 0,
            trigger_msg: String::new(),
            handle_time_ms: 0,
            handle_code: 0,
            handle_msg: String::new(),
            executor_address: String::new(),
            handler: "h".into(),
            params: String::new(),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trace_id: String::new(),
            alarm_delivery: String::new(),
            owner_node: "gone".into(),
            epoch: 1,
            dispatch_at_ms: 0,
        }
    }

    #[test]
    fn a_stranded_run_is_sent_unless_too_late_for_do_nothing_or_jobless() {
        let do_nothing = Some(MisfireStrategy::DoNothing);
        let once_now = Some(MisfireStrategy::FireOnceNow);
        let recent = stranded(NOW - 3_000, TriggerType::Cron);
        let late = stranded(NOW - 9_000, TriggerType::Cron);
        assert_eq!(fate_of(&recent, do_nothing, NOW, 5_000), Fate::Send);
        assert_eq!(fate_of(&late, do_nothing, NOW, 5_000), Fate::SkipLate);
        assert_eq!(fate_of(&late, once_now, NOW, 5_000), Fate::Send);
        assert_eq!(fate_of(&recent, None, NOW, 5_000), Fate::SkipJobless);
        // A manual run is never a misfire, however late.
        let manual = stranded(0, TriggerType::Manual);
        assert_eq!(fate_of(&manual, do_nothing, NOW, 5_000), Fate::Send);
        // A shard of an expanded broadcast goes, to complete it.
        let shard = RunLog {
            shard_index: 1,
            shard_total: 3,
            ..late
        };
        assert_eq!(fate_of(&shard, do_nothing, NOW, 5_000), Fate::Send);
    }
}
