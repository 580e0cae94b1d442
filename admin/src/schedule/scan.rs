//! The scan loop: one schedule round per second under the database lock: on SQLite the file's
//! write lock over every job, on the servers the row locks of this admin's partitions over
//! their jobs only (`model::partition`), so admins plan side by side.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Scheduler;
use super::plan::{ScanParams, plan_job};
use crate::health::Loop;
use crate::model::{Fire, Job, LogId, NewRun, UnwrittenFire};
use crate::store::RoundPlan;

/// The pause after a failed round. The fires stay in the job rows meanwhile, and the next
/// round accounts for the missed ones by the misfire rules. Short, because a failing round is
/// cheap (a full disk fails at once; a server that is down makes the round wait for its pool's
/// acquire timeout anyway), and once the database is back firing resumes at the next whole
/// second after the retry.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(400);

/// Runs schedule rounds until cancelled.
pub async fn run_scan(scheduler: Arc<Scheduler>, cancel: CancellationToken) {
    let clock = Arc::clone(&scheduler.clock);
    let mut failures: u32 = 0;
    loop {
        let started = clock.now_ms();
        let timer = std::time::Instant::now();
        let round = scan_once(&scheduler, started).await;
        crate::metrics::observe_scan(timer.elapsed());
        crate::metrics::set_planned_fires(scheduler.ring_len());
        let pause = match round {
            Ok(round) => {
                failures = 0;
                scheduler.health.succeeded(Loop::Scan);
                let idle_period = idle_period(round.partitioned, read_ahead(&scheduler.config));
                pause_after_round(started, clock.now_ms(), round.jobs_read, idle_period)
            }
            Err(error) => {
                failures += 1;
                scheduler.health.failed(Loop::Scan, &error);
                // Every round of a long outage would repeat the same warning: the first and
                // every tenth are warnings, health says the rest (`crate::health`).
                if failures % 10 == 1 {
                    tracing::warn!(%error, retry = ?RETRY_AFTER_FAILURE, failures,
                        "schedule round failed; retrying");
                } else {
                    tracing::debug!(%error, failures, "schedule round failed; retrying");
                }
                RETRY_AFTER_FAILURE
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = scheduler.wake.notified() => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
    release_partitions(&scheduler).await;
}

/// A clean stop hands this admin's partitions to the others at once (their next round takes
/// them) instead of after its lease. Its planned fires stay its own PENDING rows: they are not
/// in the partitions but in the rows, adopted as ever.
async fn release_partitions(scheduler: &Scheduler) {
    match scheduler.store.release_partitions(&scheduler.node).await {
        Ok(0) => {}
        Ok(released) => tracing::info!(released, "released this admin's partitions"),
        Err(error) => tracing::warn!(%error, "releasing this admin's partitions failed; \
            the others take them once this node's lease lapses"),
    }
}

/// What a round did, for the pacing of the next.
struct RoundDone {
    jobs_read: usize,
    /// It planned only this admin's partitions (the servers), not every job (SQLite).
    partitioned: bool,
}

/// How far ahead a round reads jobs (their next fire within this of now), where `pre_read` is
/// how far ahead it plans them.
///
/// A job read has every fire up to `pre_read` planned and its row written once. Reading every
/// job due within the whole `pre_read` would read and rewrite a job firing every second at
/// every round, one job-row write per fire; reading it only once its next fire comes within
/// this shorter distance plans a few seconds of its fires at a time (a job firing every second
/// is read every third round or so, at the default `pre_read`), and reads fewer job rows per
/// round. Rounds come a second apart, so a job's first fire planned by a round is at least
/// this, less a second, ahead: that has to leave the ring its lead before the second (the
/// claim's, at most `MAX_LEAD_MS`, plus `send_ahead_ms`) and a second more for the round itself.
/// Never more than `pre_read`, never less than half of it.
pub(super) fn read_ahead(config: &crate::config::Config) -> Duration {
    let pre_read = config.pre_read;
    let needed_ms = (config.send_ahead_ms as i64)
        .saturating_add(crate::trigger::claim_pace::MAX_LEAD_MS)
        .saturating_add(2 * 1000);
    let needed = Duration::from_millis(u64::try_from(needed_ms).unwrap_or(u64::MAX));
    needed.max(pre_read / 2).min(pre_read)
}

/// How long the scan may sleep after a round that found no job due within `read_ahead`.
///
/// Under one global lock (SQLite) any round plans every job, so an idle admin may sleep
/// almost the whole read-ahead distance: the admin that saves a job wakes its own scan, and
/// that round plans it. A second less (in whole seconds, to keep the rounds' half-second
/// phase) leaves the first fire found after the sleep as far ahead as a busy round's. With
/// partitions only the owner plans a job, and neither signal crosses admins: a job saved
/// through another admin, and a partition released at a join, wait for the owner's next round.
/// A second bounds that wait, well inside the window the previous owner planned ahead
/// (`pre_read`), so a moved partition's fires go on without a gap and a new job's first fire
/// is planned within a second; the cost is one small round a second per admin.
fn idle_period(partitioned: bool, read_ahead: Duration) -> Duration {
    let second = Duration::from_secs(1);
    if partitioned {
        read_ahead.min(second)
    } else {
        Duration::from_secs(read_ahead.as_secs().saturating_sub(1).max(1))
    }
}

/// One round: transactions of at most `scan_chunk_jobs` jobs until none is left due in the
/// window or `pre_read_count` jobs were read.
///
/// Why chunks: on SQLite's single writer an API write waits for the write in progress, and at
/// twice an admin's capacity one transaction of 6 000 jobs and all their fires in the window
/// wrote 20 000 rows or more (issue 11). Each chunk holds the schedule lock and reads the jobs
/// the previous one left due, in `trigger_next_ms` order, so the round covers the same jobs as
/// one big transaction would.
async fn scan_once(
    scheduler: &Arc<Scheduler>,
    now: i64,
) -> Result<RoundDone, crate::store::StoreError> {
    let config = &scheduler.config;
    let calendars = scheduler
        .calendars
        .current(&scheduler.store, now, config.default_time_zone())
        .await?;
    let params = ScanParams {
        now_ms: now,
        window_ms: config.pre_read.as_millis() as i64,
        misfire_threshold_ms: config.misfire_threshold.as_millis() as i64,
        default_tz: config.default_time_zone(),
        node_id: scheduler.node.node_id.clone(),
        epoch: scheduler.node.epoch,
        calendars,
    };
    // The partitions this round plans (servers): each round first takes its share of free
    // partitions or releases its surplus (`model::partition`). `None` on SQLite: every job.
    let partitions = scheduler
        .store
        .rebalance_partitions(&scheduler.node, active_within_ms(config.pre_read))
        .await?;
    if let Some(owned) = &partitions {
        tracing::debug!(partitions = owned.len(), "partitions owned this round");
    }
    let mut found: i64 = 0;
    while found < config.pre_read_count {
        let limit = config.scan_chunk_jobs.min(config.pre_read_count - found);
        let read = scan_chunk(scheduler, &params, partitions.as_deref(), limit).await? as i64;
        found += read;
        if read < limit {
            break;
        }
    }
    Ok(RoundDone {
        jobs_read: found as usize,
        partitioned: partitions.is_some(),
    })
}

/// How recently an admin must have rebalanced to count in the partition share: longer than
/// the longest pause between its rounds (an idle scan sleeps up to `pre_read`), so a live admin
/// is never counted out between two of its rounds.
fn active_within_ms(pre_read: Duration) -> i64 {
    (pre_read.as_millis() as i64).saturating_mul(2).max(3_000)
}

/// What one row of a round stands for, kept beside the row until the store answers with ids.
enum RowRole {
    /// A fire, dispatched (at once or from the ring) once its row is written.
    Fire(UnwrittenFire),
    /// An occurrence the plan skipped (a misfire); its row is kept only when tracing is on, to
    /// give it a span once written.
    Skipped(Option<NewRun>),
    /// A fire held back by its job's jitter: the follow-up loop dispatches it when its
    /// `dispatch_at_ms` comes, like a retry after its backoff.
    Delayed,
}

/// One transaction of a round: lock, read at most `limit` due jobs, plan, write, commit; then
/// hand the fires to the ring or dispatch. Returns the jobs read.
async fn scan_chunk(
    scheduler: &Arc<Scheduler>,
    params: &ScanParams,
    partitions: Option<&[i64]>,
    limit: i64,
) -> Result<usize, crate::store::StoreError> {
    let now = params.now_ms;
    // The role of each row, in the order of the round's rows: the store answers with the id of
    // each row by the same position (none where the fire's row existed already).
    let mut roles: Vec<RowRole> = Vec::new();
    let tracing_on = crate::telemetry::tracer().is_some();
    let mut plan_round = |jobs: Vec<Job>| {
        let mut round = RoundPlan::default();
        for job in jobs {
            let job_plan = plan_job(&job, params);
            let fires = job_plan.fire_of_each_run(&Arc::new(job));
            for (run, fire) in job_plan.runs.iter().zip(fires) {
                roles.push(match fire {
                    Some(fire) => RowRole::Fire(fire),
                    None if run.status == crate::model::RunStatus::Pending => RowRole::Delayed,
                    None => RowRole::Skipped(tracing_on.then(|| run.clone())),
                });
            }
            round.new_runs.extend(job_plan.runs);
            round.job_updates.push(job_plan.update);
        }
        round
    };
    // Jobs are read by the shorter read-ahead and planned through the whole window.
    let read_end_ms = now + read_ahead(&scheduler.config).as_millis() as i64;
    let store = &scheduler.store;
    let (found, run_ids) = match partitions {
        None => {
            store
                .run_schedule_round(read_end_ms, limit, &mut plan_round)
                .await?
        }
        Some(owned) => {
            store
                .run_partition_round(&scheduler.node, owned, read_end_ms, limit, &mut plan_round)
                .await?
        }
    };
    let inserted_count = run_ids.iter().flatten().count();
    tracing::debug!(
        jobs = found,
        rows = inserted_count,
        round_ms = scheduler.clock.now_ms() - now,
        "schedule round written"
    );
    let mut fires: Vec<Fire> = Vec::new();
    let mut skipped = 0;
    for (role, id) in roles.into_iter().zip(run_ids) {
        // A row not written (`None`) existed already: its fire was handed on when it was.
        let Some(id) = id else { continue };
        match role {
            RowRole::Fire(fire) => fires.push(fire.written(id)),
            RowRole::Skipped(row) => {
                skipped += 1;
                if let Some(row) = row {
                    record_skipped(&row, id);
                }
            }
            RowRole::Delayed => {}
        }
    }
    crate::metrics::dispatched(crate::metrics::Dispatch::Skipped, skipped);
    scheduler.schedule_fires(fires);
    Ok(found)
}

/// The span of an occurrence the plan skipped (a misfire), now that its row has an id.
fn record_skipped(row: &NewRun, log_id: LogId) {
    let run = crate::telemetry::UnsentRun {
        job_id: row.job_id,
        log_id,
        scheduled_at_ms: row.scheduled_at_ms,
        trigger_type: row.trigger_type,
        attempt: row.attempt,
    };
    crate::telemetry::record_unsent(run, "skipped", &row.trigger_msg);
}

/// The scan runs half-way through each second: the ring dispatches (and claims its fires in the
/// database) at every second boundary, and the two should not queue on the same write lock.
const SCAN_PHASE_MS: i64 = 500;

/// XXL-JOB's pacing, shifted by [`SCAN_PHASE_MS`]: straight on after a slow round, to the next
/// half-second mark when jobs were due, otherwise up to `idle_period` ([`idle_period`]; a
/// started job wakes the scan early).
fn pause_after_round(
    started_ms: i64,
    finished_ms: i64,
    found: usize,
    idle_period: Duration,
) -> Duration {
    if finished_ms - started_ms >= 1000 {
        return Duration::ZERO;
    }
    let period_ms = if found > 0 {
        1000
    } else {
        idle_period.as_millis() as i64
    };
    let pause_ms = period_ms - (finished_ms - SCAN_PHASE_MS).rem_euclid(1000);
    Duration::from_millis(pause_ms.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_aligns_to_the_next_half_second_when_jobs_were_due() {
        let pause = pause_after_round(10_000, 10_120, 3, Duration::from_secs(5));
        assert_eq!(pause, Duration::from_millis(380));
        let idle = pause_after_round(10_000, 10_120, 0, Duration::from_secs(5));
        assert_eq!(idle, Duration::from_millis(4380));
        let after_mark = pause_after_round(10_000, 10_700, 3, Duration::from_secs(5));
        assert_eq!(after_mark, Duration::from_millis(800));
        assert_eq!(
            pause_after_round(10_000, 11_200, 3, Duration::from_secs(5)),
            Duration::ZERO
        );
    }

    #[test]
    fn a_partitioned_admin_idles_a_second_at_most_so_moved_partitions_leave_no_gap() {
        let pre_read = Duration::from_secs(5);
        // Unpartitioned, a second less than the read-ahead, in whole seconds.
        assert_eq!(idle_period(false, pre_read), Duration::from_secs(4));
        assert_eq!(
            idle_period(false, Duration::from_millis(3_300)),
            Duration::from_secs(2)
        );
        assert_eq!(
            idle_period(false, Duration::from_millis(1_500)),
            Duration::from_secs(1)
        );
        let partitioned = idle_period(true, pre_read);
        assert_eq!(partitioned, Duration::from_secs(1));
        // An empty round then waits for the next half-second mark, as a busy one does.
        assert_eq!(
            pause_after_round(10_000, 10_120, 0, partitioned),
            Duration::from_millis(380)
        );
        // A shorter window than a second stays the bound.
        let short = Duration::from_millis(400);
        assert_eq!(idle_period(true, short), short);
    }

    fn config(pre_read_ms: u64, send_ahead_ms: u64) -> crate::config::Config {
        crate::config::Config {
            pre_read: Duration::from_millis(pre_read_ms),
            send_ahead_ms,
            ..Default::default()
        }
    }

    #[test]
    fn the_read_ahead_leaves_the_ring_its_lead_and_stays_inside_the_window() {
        // 800 ms of claim lead, the send-ahead lead and two seconds for the rounds.
        assert_eq!(read_ahead(&config(5_000, 0)), Duration::from_millis(2_800));
        assert_eq!(
            read_ahead(&config(5_000, 500)),
            Duration::from_millis(3_300)
        );
        // Never past the window, never under half of it.
        assert_eq!(read_ahead(&config(5_000, 3_000)), Duration::from_secs(5));
        assert_eq!(read_ahead(&config(2_000, 0)), Duration::from_secs(2));
        assert_eq!(read_ahead(&config(60_000, 0)), Duration::from_secs(30));
    }

    /// Rounds a second apart at the half-second phase, reading a job as the store does (its next
    /// fire within the read-ahead) and planning it through the window; returns the rounds that
    /// read it and, for each planned fire, how far ahead of its round it was planned.
    fn simulate_rounds(config: &crate::config::Config, period_s: u32) -> (usize, Vec<(i64, i64)>) {
        use crate::model::{GroupId, JobId, JobStatus, ScheduleType};
        const T0: i64 = 1_700_000_000_000;
        let mut job = Job {
            id: JobId(1),
            schedule_type: ScheduleType::FixRate,
            schedule_conf: period_s.to_string(),
            status: JobStatus::Running,
            trigger_next_ms: T0,
            ..Job::new(GroupId(1), "every second")
        };
        let read_ahead_ms = read_ahead(config).as_millis() as i64;
        let (mut reads, mut planned) = (0, Vec::new());
        for round in 0..120 {
            let now = T0 - 5_500 + round * 1_000;
            if job.trigger_next_ms > now + read_ahead_ms {
                continue;
            }
            reads += 1;
            let params = ScanParams {
                now_ms: now,
                window_ms: config.pre_read.as_millis() as i64,
                misfire_threshold_ms: config.misfire_threshold.as_millis() as i64,
                default_tz: chrono_tz::UTC,
                node_id: "n".into(),
                epoch: 1,
                calendars: Arc::default(),
            };
            let plan = plan_job(&job, &params);
            for run in &plan.runs {
                assert_eq!(run.status, crate::model::RunStatus::Pending, "{run:?}");
                planned.push((run.scheduled_at_ms, run.scheduled_at_ms - now));
            }
            job.trigger_next_ms = plan.update.trigger_next_ms;
            job.trigger_last_ms = plan.update.trigger_last_ms;
        }
        (reads, planned)
    }

    #[test]
    fn a_job_firing_every_second_is_read_once_per_several_fires_and_each_fire_planned_once() {
        for send_ahead_ms in [0, 500, 1_000] {
            let config = config(5_000, send_ahead_ms);
            let (reads, planned) = simulate_rounds(&config, 1);
            let times: Vec<i64> = planned.iter().map(|(at, _)| *at).collect();
            let first = times[0];
            let every_second: Vec<i64> =
                (0..times.len() as i64).map(|k| first + k * 1_000).collect();
            assert_eq!(times, every_second, "each second planned once, in order");
            assert!(times.len() >= 115, "{} fires planned", times.len());
            // Read at every round (one job-row write per fire) before the read-ahead.
            assert!(
                reads * 2 <= times.len(),
                "lead {send_ahead_ms}: {reads} reads for {} fires",
                times.len()
            );
            // Each fire reaches the ring with its claim and send-ahead lead and a second to spare.
            let least_ahead = planned.iter().map(|(_, ahead)| *ahead).min().unwrap_or(0);
            let lead = crate::trigger::claim_pace::MAX_LEAD_MS + send_ahead_ms as i64;
            assert!(
                least_ahead >= lead + 1_000,
                "lead {send_ahead_ms}: a fire planned only {least_ahead} ms ahead"
            );
        }
    }

    #[test]
    fn a_job_firing_less_often_than_the_window_is_read_once_per_fire_as_before() {
        let (reads, planned) = simulate_rounds(&config(5_000, 500), 10);
        assert_eq!(reads, planned.len());
        assert!(
            planned.iter().all(|(_, ahead)| *ahead >= 2_300),
            "{planned:?}"
        );
    }
}
