//! The campaign's overlap-policy jobs: a few jobs firing every other second whose runs take
//! longer than that every other occurrence (the executors' `slow` handler), under BUFFER_ALL,
//! BUFFER_ONE and SKIP, fired through the same faults as the rest of the cluster. Then a
//! verdict per policy, from the executors' records (each run's start and end) and the rows.
//!
//! Each occurrence of the window ends in exactly one class:
//! - **ran**: an executor ran it; **duplicated** if more than one did (or the database holds
//!   two dispatched rows of it);
//! - **skipped by the policy**: not run, its SKIPPED row names the overlap policy;
//!   **skipped otherwise**: its SKIPPED row gives another reason (a misfire while the admins
//!   were down); a SKIPPED row without a reason fails the campaign;
//! - **failed**: not run, a final row says why (lost with its executor…);
//! - **unfinished**: its row still WAITING, PENDING or RUNNING at the end (a BUFFER_ALL
//!   backlog the drain did not clear);
//! - **unaccounted**: not run, yet its row says it succeeded;
//! - **lost**: not run and no row.
//!
//! Across occurrences, per job: **overlapping** counts runs that started while an earlier
//! run of the same job had not ended (every policy here promises one at a time); **out of
//! order** counts BUFFER_ALL runs started after a run of a later occurrence; and a watcher
//! polls the WAITING rows during the campaign, so **most waiting** is the most rows of one
//! job seen WAITING at once (BUFFER_ONE promises one).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tonic::transport::Channel;
use xjob_admin::model::{GroupId, JobId, LogFilter, OverlapPolicy, RunStatus};
use xjob_admin::store::Store;
use xjob_proto::pb;
use xjob_proto::pb::job_admin_client::JobAdminClient;
use xjob_testkit::misfire::{COVERS_LATER, MisfireSpans, ScheduledRow};

use crate::metrics::Record;

/// Every other second: even epoch seconds.
const CRON: &str = "*/2 * * * * ?";
const STEP_MS: i64 = 2000;

/// The policies, each with its handler's lengths (`STEP_MS:even,odd` occurrence): one run in
/// two is longer than the period; BUFFER_ALL's still average under it, so its queue drains;
/// BUFFER_ONE's long run covers two later fires, so one waits and the next is skipped.
const CASES: [(OverlapPolicy, pb::OverlapPolicy, &str); 3] = [
    (
        OverlapPolicy::BufferAll,
        pb::OverlapPolicy::BufferAll,
        "2000:2500,0",
    ),
    (
        OverlapPolicy::BufferOne,
        pb::OverlapPolicy::BufferOne,
        "2000:4500,0",
    ),
    (OverlapPolicy::Skip, pb::OverlapPolicy::Skip, "2000:3000,0"),
];

/// One job of the case.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    pub id: i64,
    pub policy: OverlapPolicy,
}

/// Creates `per_policy` jobs of each policy (not started).
pub async fn create(
    client: &mut JobAdminClient<Channel>,
    group_id: i64,
    per_policy: usize,
) -> anyhow::Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for (policy, wire, params) in CASES {
        for index in 0..per_policy {
            let name = format!("overlap-{policy}-{index}");
            let id =
                crate::grpc::create_slow_job(client, group_id, (&name, CRON), wire, params).await?;
            jobs.push(Job { id, policy });
        }
    }
    Ok(jobs)
}

/// The occurrences of `job_id` in the window `[start_ms, end_ms)`.
fn planned(start_ms: i64, end_ms: i64) -> impl Iterator<Item = i64> {
    let first = start_ms.div_euclid(STEP_MS) * STEP_MS;
    (first..end_ms)
        .step_by(STEP_MS as usize)
        .filter(move |at| *at >= start_ms)
}

/// Polls the jobs' WAITING rows while the campaign runs; keeps the most seen at once per job.
pub struct Watcher {
    most: Arc<Mutex<HashMap<i64, u64>>>,
    task: tokio::task::JoinHandle<()>,
}

const WATCH_EVERY: Duration = Duration::from_millis(500);

impl Watcher {
    pub fn start(store: Store, jobs: &[Job]) -> Watcher {
        let most: Arc<Mutex<HashMap<i64, u64>>> = Arc::new(Mutex::new(HashMap::new()));
        let seen = Arc::clone(&most);
        let ids: Vec<i64> = jobs.iter().map(|job| job.id).collect();
        let task = tokio::spawn(async move {
            loop {
                for &id in &ids {
                    let filter = LogFilter {
                        job_id: Some(JobId(id)),
                        status: Some(RunStatus::Waiting),
                        limit: 100,
                        ..LogFilter::default()
                    };
                    // A database outage is one of the faults: that poll just sees nothing.
                    if let Ok(rows) = store.list_logs(&filter).await
                        && let Ok(mut most) = seen.lock()
                    {
                        let entry: &mut u64 = most.entry(id).or_default();
                        *entry = (*entry).max(rows.len() as u64);
                    }
                }
                tokio::time::sleep(WATCH_EVERY).await;
            }
        });
        Watcher { most, task }
    }

    /// Stops polling; the most WAITING rows seen at once per job.
    pub fn stop(self) -> HashMap<i64, u64> {
        self.task.abort();
        self.most
            .lock()
            .map(|most| most.clone())
            .unwrap_or_default()
    }
}

/// A run row as the checker needs it: the reason of a SKIPPED one included.
#[derive(Debug, Clone)]
pub struct Row {
    pub id: i64,
    pub job_id: i64,
    pub scheduled_at_ms: i64,
    pub status: RunStatus,
    pub reason: String,
    /// Trigger type, claim time and owner, to tell how a run out of turn came about.
    pub how: String,
}

/// Every row of the jobs, with how each came about.
pub async fn rows(store: &Store, group_id: i64, job_ids: &[i64]) -> anyhow::Result<Vec<Row>> {
    const PAGE: i64 = 5_000;
    let mut rows = Vec::new();
    for &job_id in job_ids {
        let mut offset = 0;
        loop {
            let filter = LogFilter {
                group_id: Some(GroupId(group_id)),
                job_id: Some(JobId(job_id)),
                offset,
                limit: PAGE,
                ..LogFilter::default()
            };
            let page = store.list_logs(&filter).await.map_err(|error| {
                anyhow::anyhow!("cannot read the rows of job {job_id}: {error}")
            })?;
            let full = page.len() as i64 == PAGE;
            rows.extend(
                page.iter()
                    .filter(|row| row.shard_index == 0)
                    .map(|row| Row {
                        id: row.id.0,
                        how: format!(
                            "{:?} claimed {} by {}/{}, sent to '{}', handled {} ({:?}; {:?})",
                            row.trigger_type,
                            row.trigger_time_ms,
                            row.owner_node,
                            row.epoch,
                            row.executor_address,
                            row.handle_time_ms,
                            row.trigger_msg,
                            row.handle_msg,
                        ),
                        job_id: row.job_id.0,
                        scheduled_at_ms: row.scheduled_at_ms,
                        status: row.status,
                        reason: row.trigger_msg.clone(),
                    }),
            );
            if !full {
                break;
            }
            offset += PAGE;
        }
    }
    Ok(rows)
}

/// The `slow` runs' ends the executors recorded: `(job_id, scheduled_at_ms, end_ms)`.
pub fn read_ends(dir: &Path, executors: usize) -> anyhow::Result<Vec<Record>> {
    let mut ends = Vec::new();
    for index in 0..executors {
        let path = dir.join(format!("records-{index}.txt"));
        let text = std::fs::read_to_string(&path)
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        ends.extend(text.lines().filter_map(parse_end));
    }
    Ok(ends)
}

fn parse_end(line: &str) -> Option<Record> {
    let mut fields = line
        .strip_prefix("end ")?
        .split_whitespace()
        .map(str::parse);
    match (fields.next(), fields.next(), fields.next()) {
        (Some(Ok(job)), Some(Ok(scheduled)), Some(Ok(end))) => Some((job, scheduled, end)),
        _ => None,
    }
}

/// One policy's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub policy: String,
    pub jobs: u64,
    pub planned: u64,
    pub ran: u64,
    pub duplicated: u64,
    pub skipped_by_policy: u64,
    pub skipped_otherwise: u64,
    pub skipped_without_reason: u64,
    pub failed: u64,
    pub unfinished: u64,
    pub unaccounted: u64,
    pub lost: u64,
    pub overlapping: u64,
    pub out_of_order: u64,
    /// The most WAITING rows of one job seen at once (0 when none was seen).
    pub most_waiting: u64,
    /// Runs whose end was never recorded (their executor killed mid-run).
    pub no_end: u64,
    #[serde(skip)]
    pub examples: Vec<String>,
}

impl Verdict {
    /// An occurrence lost or run twice, two runs of a job at once, a BUFFER_ALL run out of
    /// order, more than one waiting under BUFFER_ONE, a skip without its reason.
    pub fn failed_campaign(&self) -> bool {
        let too_many_waiting =
            self.policy == OverlapPolicy::BufferOne.as_str() && self.most_waiting > 1;
        self.lost
            + self.duplicated
            + self.overlapping
            + self.out_of_order
            + self.skipped_without_reason
            > 0
            || too_many_waiting
    }

    fn example(&mut self, line: String) {
        if self.examples.len() < 10 {
            self.examples.push(line);
        }
    }
}

/// What the checker reads.
pub struct Seen<'a> {
    pub records: &'a [Record],
    pub ends: &'a [Record],
    pub rows: &'a [Row],
    pub most_waiting: &'a HashMap<i64, u64>,
}

/// The verdict of each policy over the window `[start_ms, end_ms)`.
pub fn check(jobs: &[Job], window: (i64, i64), seen: &Seen) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for (policy, _, _) in CASES {
        let mut verdict = Verdict {
            policy: policy.as_str().to_string(),
            ..Verdict::default()
        };
        for job in jobs.iter().filter(|job| job.policy == policy) {
            verdict.jobs += 1;
            check_job(&mut verdict, job, window, seen);
        }
        if verdict.jobs > 0 {
            verdicts.push(verdict);
        }
    }
    verdicts
}

/// One run of a job: its occurrence, start and (when recorded) end.
#[derive(Debug, Clone, Copy)]
struct Run {
    scheduled_at_ms: i64,
    start_ms: i64,
    end_ms: Option<i64>,
}

fn runs_of(job_id: i64, seen: &Seen) -> Vec<Run> {
    let mut ends: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for &(_, scheduled, end) in seen.ends.iter().filter(|end| end.0 == job_id) {
        ends.entry(scheduled).or_default().push(end);
    }
    let mut starts: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for &(_, scheduled, start) in seen.records.iter().filter(|r| r.0 == job_id) {
        starts.entry(scheduled).or_default().push(start);
    }
    let mut runs = Vec::new();
    for (scheduled, mut starts) in starts {
        starts.sort_unstable();
        let mut ends = ends.remove(&scheduled).unwrap_or_default();
        ends.sort_unstable();
        // The n-th start with the first end after it not taken yet.
        let mut ends = ends.into_iter().peekable();
        for start in starts {
            while ends.next_if(|end| *end < start).is_some() {}
            runs.push(Run {
                scheduled_at_ms: scheduled,
                start_ms: start,
                end_ms: ends.next(),
            });
        }
    }
    runs.sort_by_key(|run| (run.start_ms, run.scheduled_at_ms));
    runs
}

fn check_job(verdict: &mut Verdict, job: &Job, window: (i64, i64), seen: &Seen) {
    let runs = runs_of(job.id, seen);
    let mut rows_of: HashMap<i64, Vec<&Row>> = HashMap::new();
    for row in seen.rows.iter().filter(|row| row.job_id == job.id) {
        rows_of.entry(row.scheduled_at_ms).or_default().push(row);
    }
    let spans = MisfireSpans::of(
        seen.rows
            .iter()
            .filter(|row| row.job_id == job.id)
            .map(|row| ScheduledRow {
                job_id: row.job_id,
                scheduled_at_ms: row.scheduled_at_ms,
                covers_later: row.status == RunStatus::Skipped && row.reason.contains(COVERS_LATER),
            }),
    );
    for at in planned(window.0, window.1) {
        verdict.planned += 1;
        let rows = rows_of.get(&at).map(Vec::as_slice).unwrap_or(&[]);
        let started = runs.iter().filter(|run| run.scheduled_at_ms == at).count();
        if started > 0 {
            verdict.ran += 1;
            let dispatched = rows
                .iter()
                .filter(|row| row.status != RunStatus::Skipped)
                .count();
            if started.max(dispatched) > 1 {
                verdict.duplicated += 1;
                let starts: Vec<i64> = runs
                    .iter()
                    .filter(|run| run.scheduled_at_ms == at)
                    .map(|run| run.start_ms)
                    .collect();
                verdict.example(format!(
                    "job {} at {at}: {started} run(s) starting at {starts:?}, rows {}",
                    job.id,
                    describe(rows)
                ));
            }
        } else {
            not_run(verdict, (job.id, at), rows, spans.covers(job.id, at));
        }
    }
    let in_window = |run: &&Run| run.scheduled_at_ms >= window.0 && run.scheduled_at_ms < window.1;
    let runs: Vec<Run> = runs.iter().filter(in_window).copied().collect();
    verdict.no_end += runs.iter().filter(|run| run.end_ms.is_none()).count() as u64;
    one_at_a_time(verdict, job, &runs, &rows_of);
    verdict.most_waiting = verdict
        .most_waiting
        .max(seen.most_waiting.get(&job.id).copied().unwrap_or(0));
}

fn not_run(verdict: &mut Verdict, (job_id, at): (i64, i64), rows: &[&Row], covered: bool) {
    let skipped = rows.iter().find(|row| row.status == RunStatus::Skipped);
    if let Some(row) = skipped {
        if row.reason.starts_with("overlap policy") {
            verdict.skipped_by_policy += 1;
        } else if row.reason.trim().is_empty() {
            verdict.skipped_without_reason += 1;
            verdict.example(format!("job {job_id} at {at}: SKIPPED without a reason"));
        } else {
            verdict.skipped_otherwise += 1;
        }
    } else if covered {
        verdict.skipped_otherwise += 1;
    } else if rows.iter().any(|row| !row.status.is_final()) {
        verdict.unfinished += 1;
    } else if rows.iter().any(|row| row.status == RunStatus::Success) {
        verdict.unaccounted += 1;
        verdict.example(format!(
            "job {job_id} at {at}: SUCCESS row, no run recorded"
        ));
    } else if rows.is_empty() {
        verdict.lost += 1;
        verdict.example(format!("job {job_id} at {at}: no run, no row"));
    } else {
        verdict.failed += 1;
    }
}

/// Runs (sorted by start) that started before an earlier one had ended; BUFFER_ALL runs of an
/// earlier occurrence started after a later one's.
fn one_at_a_time(
    verdict: &mut Verdict,
    job: &Job,
    runs: &[Run],
    rows_of: &HashMap<i64, Vec<&Row>>,
) {
    let rows = |at: i64| -> String {
        rows_of
            .get(&at)
            .map(|rows| describe(rows))
            .unwrap_or_default()
    };
    for (index, run) in runs.iter().enumerate() {
        let Some(end) = run.end_ms else { continue };
        for later in runs[index + 1..]
            .iter()
            .take_while(|later| later.start_ms < end)
        {
            verdict.overlapping += 1;
            verdict.example(format!(
                "job {}: run of {} started at {} while the run of {} went from {} to {end} \
                 ({} / {})",
                job.id,
                later.scheduled_at_ms,
                later.start_ms,
                run.scheduled_at_ms,
                run.start_ms,
                rows(later.scheduled_at_ms),
                rows(run.scheduled_at_ms)
            ));
        }
    }
    if job.policy == OverlapPolicy::BufferAll {
        for pair in runs.windows(2) {
            if pair[1].scheduled_at_ms < pair[0].scheduled_at_ms {
                verdict.out_of_order += 1;
                verdict.example(format!(
                    "job {}: run of {} started at {} after the run of {} started at {} ({} / {})",
                    job.id,
                    pair[1].scheduled_at_ms,
                    pair[1].start_ms,
                    pair[0].scheduled_at_ms,
                    pair[0].start_ms,
                    rows(pair[1].scheduled_at_ms),
                    rows(pair[0].scheduled_at_ms)
                ));
            }
        }
    }
}

/// The rows of one occurrence as the examples show them: id, status and how each came about.
fn describe(rows: &[&Row]) -> String {
    rows.iter()
        .map(|row| format!("row {} {:?} {}", row.id, row.status, row.how))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The table's lines for the overlap jobs.
pub fn text(verdicts: &[Verdict]) -> String {
    let mut text = String::from("overlap policies (occurrences every 2 s, some runs longer):\n");
    text.push_str(&format!(
        "  {:<11} {:>4} {:>7} {:>5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} {:>5} {:>5} {:>5} {:>5}\n",
        "policy",
        "jobs",
        "planned",
        "ran",
        "skip-p",
        "skip-o",
        "failed",
        "unfin",
        "LOST",
        "DUP",
        "OVERL",
        "ORDER",
        "MAXW",
        "noend"
    ));
    for v in verdicts {
        text.push_str(&format!(
            "  {:<11} {:>4} {:>7} {:>5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5} {:>5} {:>5} {:>5} {:>5}\n",
            v.policy,
            v.jobs,
            v.planned,
            v.ran,
            v.skipped_by_policy,
            v.skipped_otherwise,
            v.failed,
            v.unfinished,
            v.lost,
            v.duplicated,
            v.overlapping,
            v.out_of_order,
            v.most_waiting,
            v.no_end
        ));
        for example in &v.examples {
            text.push_str(&format!("    {example}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    fn row(job_id: i64, at: i64, status: RunStatus, reason: &str) -> Row {
        Row {
            id: at,
            how: String::new(),
            job_id,
            scheduled_at_ms: T0 + at,
            status,
            reason: reason.into(),
        }
    }

    fn verdict_of(policy: OverlapPolicy, seen: &Seen) -> Verdict {
        let jobs = [Job { id: 1, policy }];
        check(&jobs, (T0, T0 + 10_000), seen)
            .pop()
            .expect("one verdict")
    }

    #[test]
    fn the_window_holds_every_other_second() {
        let at: Vec<i64> = planned(T0 + 1, T0 + 6000).collect();
        assert_eq!(at, vec![T0 + 2000, T0 + 4000]);
    }

    #[test]
    fn end_lines_are_read_and_start_lines_are_not() {
        assert_eq!(parse_end("end 3 4000 4500"), Some((3, 4000, 4500)));
        assert_eq!(parse_end("3 4000 4100"), None);
        assert_eq!(parse_end("end 3 x 4500"), None);
    }

    #[test]
    fn each_occurrence_lands_in_one_class() {
        let records = vec![
            (1, T0, T0 + 10),
            (1, T0 + 2000, T0 + 2600),
            (1, T0 + 8000, T0 + 8010),
        ];
        let ends = vec![
            (1, T0, T0 + 2500),
            (1, T0 + 2000, T0 + 2700),
            (1, T0 + 8000, T0 + 8020),
        ];
        let rows = vec![
            row(1, 0, RunStatus::Success, ""),
            row(1, 2000, RunStatus::Success, ""),
            row(
                1,
                4000,
                RunStatus::Skipped,
                "overlap policy BUFFER_ONE: run 2 of this job already waits",
            ),
            row(1, 6000, RunStatus::Lost, ""),
            row(1, 8000, RunStatus::Success, ""),
        ];
        let most = HashMap::from([(1, 1)]);
        let seen = Seen {
            records: &records,
            ends: &ends,
            rows: &rows,
            most_waiting: &most,
        };
        let verdict = verdict_of(OverlapPolicy::BufferOne, &seen);
        assert_eq!(verdict.planned, 5);
        assert_eq!(
            (verdict.ran, verdict.skipped_by_policy, verdict.failed),
            (3, 1, 1)
        );
        assert_eq!(
            (verdict.lost, verdict.duplicated, verdict.overlapping),
            (0, 0, 0)
        );
        assert!(!verdict.failed_campaign(), "{verdict:?}");
    }

    #[test]
    fn a_run_started_before_the_earlier_one_ended_overlaps() {
        // The run of 2000 starts at 2100, while the run of 0 goes on to 2500.
        let records = vec![(1, T0, T0 + 10), (1, T0 + 2000, T0 + 2100)];
        let ends = vec![(1, T0, T0 + 2500), (1, T0 + 2000, T0 + 2200)];
        let rows = vec![
            row(1, 0, RunStatus::Success, ""),
            row(1, 2000, RunStatus::Success, ""),
        ];
        let none = HashMap::new();
        let seen = Seen {
            records: &records,
            ends: &ends,
            rows: &rows,
            most_waiting: &none,
        };
        let verdict = verdict_of(OverlapPolicy::Skip, &seen);
        assert_eq!(verdict.overlapping, 1);
        assert!(verdict.failed_campaign());
        // A run whose end was never recorded (its executor killed) is not held against others.
        let seen = Seen {
            ends: &ends[1..],
            ..seen
        };
        let verdict = verdict_of(OverlapPolicy::Skip, &seen);
        assert_eq!((verdict.overlapping, verdict.no_end), (0, 1));
    }

    #[test]
    fn buffer_all_runs_in_order_and_buffer_one_holds_one() {
        let records = vec![(1, T0 + 2000, T0 + 2100), (1, T0, T0 + 3000)];
        let ends = vec![(1, T0 + 2000, T0 + 2200), (1, T0, T0 + 3100)];
        let rows = vec![
            row(1, 0, RunStatus::Success, ""),
            row(1, 2000, RunStatus::Success, ""),
        ];
        let two = HashMap::from([(1, 2)]);
        let seen = Seen {
            records: &records,
            ends: &ends,
            rows: &rows,
            most_waiting: &two,
        };
        let verdict = verdict_of(OverlapPolicy::BufferAll, &seen);
        assert_eq!((verdict.out_of_order, verdict.overlapping), (1, 0));
        assert!(verdict.failed_campaign());
        // Two waiting at once is BUFFER_ALL's due, not BUFFER_ONE's.
        let records = &records[..1];
        let seen = Seen { records, ..seen };
        let verdict = verdict_of(OverlapPolicy::BufferOne, &seen);
        assert_eq!((verdict.most_waiting, verdict.out_of_order), (2, 0));
        assert!(verdict.failed_campaign());
    }

    #[test]
    fn no_row_is_lost_a_waiting_row_is_unfinished_a_bare_skip_fails() {
        let rows = vec![
            row(
                1,
                2000,
                RunStatus::Waiting,
                "overlap policy BUFFER_ALL: waiting",
            ),
            row(1, 4000, RunStatus::Skipped, ""),
            row(1, 6000, RunStatus::Skipped, "misfire"),
        ];
        let none = HashMap::new();
        let seen = Seen {
            records: &[],
            ends: &[],
            rows: &rows,
            most_waiting: &none,
        };
        let verdict = verdict_of(OverlapPolicy::BufferAll, &seen);
        assert_eq!((verdict.lost, verdict.unfinished), (2, 1));
        assert_eq!(
            (verdict.skipped_without_reason, verdict.skipped_otherwise),
            (1, 1)
        );
        assert!(verdict.failed_campaign());
    }
}
