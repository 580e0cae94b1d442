//! Lost runs on XXL-JOB executors that are still registered. `xxl-job-core` lists no running
//! runs, so a JVM that crashed and came back on the same address before its registration
//! expired would keep its lost runs RUNNING forever. Instead, the admin holding the executor
//! asks it: `idleBeat(jobId)` answers idle when the executor has no run of the job running or
//! queued. A run whose executor has answered idle for its job for a whole
//! `xxl_job_compat_lease` (90 s) without its result arriving is LOST. That is three of
//! xxl-job-core's 30 s callback retry rounds, so a result that is merely late still lands
//! first.
//!
//! ```text
//! every 10 s: RUNNING runs (accepted, trigger code 200) on XXL-JOB executors held here
//!   ─▶ one idleBeat per (address, job) ─▶ XxlIdleJudge::judge (pure) ─▶ LOST verdicts
//! ```

use std::collections::{HashMap, HashSet};

use super::verdict::LostVerdict;
use crate::context::AdminContext;
use crate::executor::Idleness;
use crate::model::{ExecutorInfo, ExecutorProtocol, GroupId, JobId, LogId, RunLog};

/// How often the executors are asked (a check of the lost-run monitor in between asks none).
const PROBE_EVERY_MS: i64 = 10_000;
/// Most (address, job) pairs asked per round; the rest wait for the next round.
const MAX_PROBES_PER_ROUND: usize = 256;

/// What one executor said about one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleAnswer {
    pub address: String,
    pub job_id: JobId,
    /// True when it has no run of the job running or queued.
    pub idle: bool,
}

/// What the XXL-JOB idle rule remembers between rounds.
#[derive(Debug, Default)]
pub struct XxlIdleJudge {
    last_round_ms: i64,
    /// When a run's executor was first found idle for its job (and has been since).
    idle_since: HashMap<LogId, i64>,
}

impl XxlIdleJudge {
    /// Whether a round of probes is due at `now_ms`.
    pub fn due(&mut self, now_ms: i64) -> bool {
        if now_ms - self.last_round_ms < PROBE_EVERY_MS {
            return false;
        }
        self.last_round_ms = now_ms;
        true
    }

    /// Judges `runs` (RUNNING, on XXL-JOB executors held here) by the `answers` of this round;
    /// a run without an answer (not asked, or the call failed) starts over.
    pub fn judge(
        &mut self,
        runs: &[RunLog],
        answers: &[IdleAnswer],
        now_ms: i64,
        grace_ms: i64,
    ) -> Vec<LostVerdict> {
        let idle: HashSet<(&str, JobId)> = answers
            .iter()
            .filter(|answer| answer.idle)
            .map(|answer| (answer.address.as_str(), answer.job_id))
            .collect();
        let running: HashSet<LogId> = runs.iter().map(|run| run.id).collect();
        self.idle_since.retain(|log_id, _| running.contains(log_id));
        let mut lost = Vec::new();
        for run in runs {
            let address = run.executor_address.trim_end_matches('/');
            if !idle.contains(&(address, run.job_id)) {
                self.idle_since.remove(&run.id);
                continue;
            }
            let idle_ms = now_ms - *self.idle_since.entry(run.id).or_insert(now_ms);
            if idle_ms >= grace_ms {
                lost.push(LostVerdict {
                    log_id: run.id,
                    message: format!(
                        "run lost: XXL-JOB executor {address} has had no run of job {} running \
                         or queued for {idle_ms} ms and reported no result (it restarted or \
                         dropped the run)",
                        run.job_id
                    ),
                });
            }
        }
        lost
    }
}

/// The RUNNING runs this admin judges by the idle rule: accepted by an XXL-JOB executor whose
/// registration this admin holds.
pub fn xxl_runs(runs: &[RunLog], sessions: &[ExecutorInfo]) -> Vec<RunLog> {
    let held: HashSet<&str> = sessions
        .iter()
        .filter(|session| session.protocol == ExecutorProtocol::XxlJobHttp)
        .map(|session| session.address.trim_end_matches('/'))
        .collect();
    runs.iter()
        .filter(|run| {
            run.trigger_code == 200 && held.contains(run.executor_address.trim_end_matches('/'))
        })
        .cloned()
        .collect()
}

/// Asks each (address, job) of `runs` once whether it is idle; failed calls give no answer.
pub async fn probe(ctx: &AdminContext, runs: &[RunLog]) -> Vec<IdleAnswer> {
    let group_ids: Vec<GroupId> = runs.iter().map(|run| run.group_id).collect();
    let Ok(groups) = ctx.store.get_groups(&group_ids).await else {
        return Vec::new();
    };
    let mut pairs: Vec<(String, JobId, String)> = runs
        .iter()
        .filter_map(|run| {
            let group = groups.get(&run.group_id)?;
            Some((
                run.executor_address.trim_end_matches('/').to_string(),
                run.job_id,
                group.access_token.clone(),
            ))
        })
        .collect();
    pairs.sort();
    pairs.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    let mut answers = Vec::new();
    for (address, job_id, token) in pairs.into_iter().take(MAX_PROBES_PER_ROUND) {
        if let Ok(idleness) = ctx.executors.idle_beat(&address, &token, job_id).await {
            answers.push(IdleAnswer {
                address,
                job_id,
                idle: idleness == Idleness::Idle,
            });
        }
    }
    answers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunStatus, TriggerType};

    fn run(id: i64, job_id: i64, address: &str) -> RunLog {
        RunLog {
            id: LogId(id),
            job_id: JobId(job_id),
            group_id: GroupId(1),
            fire_key: None,
            status: RunStatus::Running,
            trigger_type: TriggerType::Manual,
            scheduled_at_ms: 0,
            trigger_time_ms: 0,
            trigger_code: 200,
            trigger_msg: String::new(),
            handle_time_ms: 0,
            handle_code: 0,
            handle_msg: String::new(),
            executor_address: address.to_string(),
            handler: String::new(),
            params: String::new(),
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            trace_id: String::new(),
            owner_node: String::new(),
            epoch: 0,
            dispatch_at_ms: 0,
            alarm_delivery: String::new(),
        }
    }

    fn answer(address: &str, job_id: i64, idle: bool) -> IdleAnswer {
        IdleAnswer {
            address: address.to_string(),
            job_id: JobId(job_id),
            idle,
        }
    }

    #[test]
    fn a_run_is_lost_once_its_executor_was_idle_for_the_job_a_whole_grace() {
        let mut judge = XxlIdleJudge::default();
        let runs = [run(1, 7, "http://h:1/"), run(2, 8, "http://h:1")];
        let idle7 = [
            answer("http://h:1", 7, true),
            answer("http://h:1", 8, false),
        ];
        assert!(judge.judge(&runs, &idle7, 0, 90_000).is_empty());
        assert!(judge.judge(&runs, &idle7, 89_999, 90_000).is_empty());
        let lost = judge.judge(&runs, &idle7, 90_000, 90_000);
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].log_id, LogId(1));
        assert!(
            lost[0].message.contains("no run of job 7"),
            "{}",
            lost[0].message
        );
    }

    #[test]
    fn busy_or_unanswered_starts_the_grace_over() {
        let mut judge = XxlIdleJudge::default();
        let runs = [run(1, 7, "http://h:1")];
        assert!(
            judge
                .judge(&runs, &[answer("http://h:1", 7, true)], 0, 90_000)
                .is_empty()
        );
        // Busy again (queued behind another run): the clock restarts.
        assert!(
            judge
                .judge(&runs, &[answer("http://h:1", 7, false)], 50_000, 90_000)
                .is_empty()
        );
        assert!(
            judge
                .judge(&runs, &[answer("http://h:1", 7, true)], 100_000, 90_000)
                .is_empty()
        );
        // No answer at all (the call failed): over again.
        assert!(judge.judge(&runs, &[], 150_000, 90_000).is_empty());
        assert!(
            judge
                .judge(&runs, &[answer("http://h:1", 7, true)], 200_000, 90_000)
                .is_empty()
        );
        assert_eq!(
            judge
                .judge(&runs, &[answer("http://h:1", 7, true)], 290_000, 90_000)
                .len(),
            1
        );
    }

    #[test]
    fn only_accepted_runs_on_xxl_job_executors_held_here_are_judged() {
        let sessions = [
            ExecutorInfo {
                executor_id: "x".into(),
                app_name: "app".into(),
                address: "http://h:1".into(),
                handlers: vec![],
                registered_ms: 0,
                last_heartbeat_ms: 0,
                admin_node: "n1".into(),
                running_log_ids: vec![],
                protocol: ExecutorProtocol::XxlJobHttp,
            },
            ExecutorInfo {
                executor_id: "g".into(),
                address: "http://h:2".into(),
                protocol: ExecutorProtocol::Grpc,
                ..ExecutorInfo {
                    executor_id: String::new(),
                    app_name: "app".into(),
                    address: String::new(),
                    handlers: vec![],
                    registered_ms: 0,
                    last_heartbeat_ms: 0,
                    admin_node: "n1".into(),
                    running_log_ids: vec![],
                    protocol: ExecutorProtocol::Grpc,
                }
            },
        ];
        let maybe_delivered = RunLog {
            trigger_code: 0,
            ..run(3, 7, "http://h:1")
        };
        let runs = [
            run(1, 7, "http://h:1/"),
            run(2, 7, "http://h:2"),
            maybe_delivered,
        ];
        let judged: Vec<i64> = xxl_runs(&runs, &sessions).iter().map(|r| r.id.0).collect();
        assert_eq!(judged, vec![1]);
    }
}
