use super::judge::Answers;
use super::*;
use crate::executor::log_chunk::RunLogChunk;
use crate::model::{ExecutorInfo, RunStatus, TriggerType};
use crate::model::{GroupId, JobId, LogId};

const T0: i64 = 1_800_000_000_000;
const ADDRESS: &str = "http://127.0.0.1:9001";
const PARAMS: LostParams = LostParams {
    heartbeat_interval_ms: 1_000,
    executor_timeout_ms: 3_000,
    absence_grace_ms: 3_000,
};
const AUTO_GROUP: GroupId = GroupId(1);
const MANUAL_GROUP: i64 = 2;

fn run(id: i64, trigger_code: i32) -> RunLog {
    RunLog {
        id: LogId(id),
        job_id: JobId(1),
        group_id: AUTO_GROUP,
        fire_key: None,
        status: RunStatus::Running,
        trigger_type: TriggerType::Manual,
        scheduled_at_ms: 0,
        trigger_time_ms: T0,
        trigger_code,
        trigger_msg: String::new(),
        handle_time_ms: 0,
        handle_code: 0,
        handle_msg: String::new(),
        executor_address: ADDRESS.to_string(),
        handler: "h".into(),
        params: String::new(),
        shard_index: 0,
        shard_total: 1,
        attempt: 0,
        trace_id: String::new(),
        owner_node: "n".into(),
        epoch: 1,
        dispatch_at_ms: 0,
        alarm_delivery: String::new(),
    }
}

fn session(executor_id: &str, heartbeat_ms: i64, running: &[i64]) -> ExecutorInfo {
    ExecutorInfo {
        executor_id: executor_id.to_string(),
        app_name: "app".into(),
        address: ADDRESS.to_string(),
        handlers: vec![],
        registered_ms: T0 - 10_000,
        last_heartbeat_ms: heartbeat_ms,
        admin_node: "n".into(),
        running_log_ids: crate::model::sorted_log_ids(running.to_vec()),
        protocol: Default::default(),
    }
}

/// One check with `sessions` held here, `elsewhere` held by other admins.
fn check(
    judge: &mut LostJudge,
    runs: &[RunLog],
    sessions: &[ExecutorInfo],
    elsewhere: &[&str],
    at: i64,
) -> Vec<i64> {
    let held_elsewhere: HashSet<String> = elsewhere.iter().map(|a| a.to_string()).collect();
    let session_groups: HashSet<GroupId> = [AUTO_GROUP].into();
    let view = SessionView {
        sessions,
        held_elsewhere: &held_elsewhere,
        session_groups: &session_groups,
    };
    let judgement = judge.judge(runs, view, at, PARAMS);
    judgement
        .lost
        .iter()
        .chain(judgement.suspects.iter().map(|suspect| &suspect.verdict))
        .map(|verdict| verdict.log_id.0)
        .collect()
}

/// One check per heartbeat of session "e1" at each time, listing the given runs.
fn heartbeats(judge: &mut LostJudge, runs: &[RunLog], beats: &[(i64, &[i64])]) -> Vec<i64> {
    let mut lost = Vec::new();
    for (at, running) in beats {
        lost.extend(check(judge, runs, &[session("e1", *at, running)], &[], *at));
    }
    lost
}

#[test]
fn a_run_listed_in_heartbeats_is_alive() {
    let mut judge = LostJudge::default();
    let runs = [run(5, 200)];
    let beats: Vec<(i64, &[i64])> = (0..6).map(|i| (T0 + i * 1_000, &[5][..])).collect();
    assert!(heartbeats(&mut judge, &runs, &beats).is_empty());
}

#[test]
fn a_run_left_out_for_a_full_interval_is_lost_but_one_heartbeat_is_not_enough() {
    let mut judge = LostJudge::default();
    let runs = [run(5, 200)];
    // First sight (registration), then a heartbeat without it, then one just short of an
    // interval later, then one a full interval after the first miss.
    let lost = heartbeats(
        &mut judge,
        &runs,
        &[(T0 - 500, &[]), (T0 + 100, &[]), (T0 + 1_050, &[])],
    );
    assert!(lost.is_empty(), "missing for 950 ms only");
    let lost = heartbeats(&mut judge, &runs, &[(T0 + 1_100, &[])]);
    assert_eq!(lost, vec![5]);
}

#[test]
fn a_run_that_reappears_in_the_list_starts_over() {
    let mut judge = LostJudge::default();
    let runs = [run(5, 200)];
    let lost = heartbeats(
        &mut judge,
        &runs,
        &[
            (T0 - 500, &[]),
            (T0 + 100, &[]),
            (T0 + 600, &[5]),
            (T0 + 1_200, &[]),
            (T0 + 2_100, &[]),
        ],
    );
    assert!(lost.is_empty());
    assert_eq!(heartbeats(&mut judge, &runs, &[(T0 + 2_200, &[])]), vec![5]);
}

#[test]
fn registration_and_heartbeats_before_the_dispatch_are_no_evidence() {
    let mut judge = LostJudge::default();
    let runs = [run(5, 200)];
    // The session's first sight happens after the dispatch: it is not a heartbeat.
    let lost = heartbeats(&mut judge, &runs, &[(T0 + 5_000, &[])]);
    assert!(lost.is_empty());
    // Heartbeats from before the dispatch do not count either.
    let mut early = LostJudge::default();
    let lost = heartbeats(
        &mut early,
        &runs,
        &[(T0 - 3_000, &[]), (T0 - 2_000, &[]), (T0 - 1, &[])],
    );
    assert!(lost.is_empty());
}

#[test]
fn a_maybe_delivered_run_is_judged_only_after_the_dispatch_deadline() {
    let mut judge = LostJudge::default();
    let runs = [run(5, 0)];
    let lost = heartbeats(
        &mut judge,
        &runs,
        &[
            (T0 - 500, &[]),
            (T0 + 1_000, &[]),
            (T0 + 2_000, &[]),
            (T0 + 3_000, &[]),
        ],
    );
    assert!(lost.is_empty(), "the Run call may still be in flight");
    let lost = heartbeats(&mut judge, &runs, &[(T0 + 3_500, &[]), (T0 + 4_500, &[])]);
    assert_eq!(lost, vec![5]);
    // Listed instead: it runs, whatever the dispatch outcome was.
    let mut listed = LostJudge::default();
    let beats: Vec<(i64, &[i64])> = (0..8).map(|i| (T0 + i * 1_000, &[5][..])).collect();
    assert!(heartbeats(&mut listed, &runs, &beats).is_empty());
}

#[test]
fn a_gone_executor_loses_its_runs_after_the_grace_unless_another_admin_holds_it() {
    let runs = [run(5, 200)];
    let mut judge = LostJudge::default();
    // An AUTO group's executor: judged by absence even if never seen live here.
    assert!(check(&mut judge, &runs, &[], &[], T0 + 500).is_empty());
    assert!(check(&mut judge, &runs, &[], &[], T0 + 3_400).is_empty());
    let verdicts = judge.judge(
        &runs,
        SessionView {
            sessions: &[],
            held_elsewhere: &HashSet::new(),
            session_groups: &[AUTO_GROUP].into(),
        },
        T0 + 3_600,
        PARAMS,
    );
    let verdicts = verdicts.lost;
    assert_eq!(verdicts.len(), 1);
    assert!(
        verdicts[0].message.contains(ADDRESS),
        "{}",
        verdicts[0].message
    );

    let mut moved = LostJudge::default();
    check(&mut moved, &runs, &[session("e1", T0, &[5])], &[], T0);
    for at in [T0 + 500, T0 + 5_000, T0 + 50_000] {
        assert!(check(&mut moved, &runs, &[], &[ADDRESS], at).is_empty());
    }
}

#[test]
fn a_manual_address_is_judged_by_absence_only_once_seen_live() {
    let mut manual = run(5, 200);
    manual.group_id = GroupId(MANUAL_GROUP);
    let runs = [manual];
    let mut never_seen = LostJudge::default();
    for at in [T0, T0 + 5_000, T0 + 600_000] {
        assert!(check(&mut never_seen, &runs, &[], &[], at).is_empty());
    }
    let mut seen = LostJudge::default();
    assert!(check(&mut seen, &runs, &[session("e1", T0, &[5])], &[], T0).is_empty());
    assert!(check(&mut seen, &runs, &[], &[], T0 + 100).is_empty());
    assert_eq!(check(&mut seen, &runs, &[], &[], T0 + 3_200), vec![5]);
}

/// One stranded-run check with `sessions` held here, `elsewhere` held by other admins.
fn check_stranded(
    judge: &mut LostJudge,
    runs: &[RunLog],
    sessions: &[ExecutorInfo],
    elsewhere: &[&str],
    at: i64,
) -> Vec<LostVerdict> {
    check_stranded_probed(judge, runs, sessions, elsewhere, &[], at)
}

/// As `check_stranded`, with `absent` the runs the executors held elsewhere said they do
/// not hold.
fn check_stranded_probed(
    judge: &mut LostJudge,
    runs: &[RunLog],
    sessions: &[ExecutorInfo],
    elsewhere: &[&str],
    absent: &[i64],
    at: i64,
) -> Vec<LostVerdict> {
    let held_elsewhere: HashSet<String> = elsewhere.iter().map(|a| a.to_string()).collect();
    let view = SessionView {
        sessions,
        held_elsewhere: &held_elsewhere,
        session_groups: &HashSet::new(),
    };
    let probes = StrandedProbes {
        absent: absent.iter().copied().map(LogId).collect(),
        ..StrandedProbes::default()
    };
    judge.judge_stranded(runs, view, &probes, at, PARAMS)
}

#[test]
fn a_stranded_dispatch_is_lost_once_no_executor_listed_it_for_the_grace() {
    let mut stranded = run(5, 0);
    stranded.executor_address = String::new();
    let runs = [stranded];
    let mut judge = LostJudge::default();
    assert!(check_stranded(&mut judge, &runs, &[], &[], T0).is_empty());
    assert!(check_stranded(&mut judge, &runs, &[], &[], T0 + 3_000).is_empty());
    let lost = check_stranded(&mut judge, &runs, &[], &[], T0 + 3_100);
    assert_eq!(lost.len(), 1);
    assert!(lost[0].message.contains("stopped before recording"));

    // Listed by an executor: it was delivered and runs.
    let listing = [session("e1", T0, &[5])];
    let mut delivered = LostJudge::default();
    for at in [T0, T0 + 5_000, T0 + 50_000] {
        assert!(check_stranded(&mut delivered, &runs, &listing, &[], at).is_empty());
    }
    // Another admin holds sessions and its executors could not be asked, or one of them
    // holds the run: not judged.
    let mut cautious = LostJudge::default();
    for at in [T0, T0 + 5_000, T0 + 50_000] {
        assert!(check_stranded(&mut cautious, &runs, &[], &[ADDRESS], at).is_empty());
    }
    // Every executor held elsewhere said it does not hold the run: lost after the grace.
    let mut asked = LostJudge::default();
    let absent = [5];
    assert!(check_stranded_probed(&mut asked, &runs, &[], &[ADDRESS], &absent, T0).is_empty());
    let lost = check_stranded_probed(&mut asked, &runs, &[], &[ADDRESS], &absent, T0 + 3_100);
    assert_eq!(lost.len(), 1, "{lost:?}");
}

fn chunk(to_line: i32, is_end: bool) -> RunLogChunk {
    RunLogChunk {
        from_line: 1,
        to_line,
        content: String::new(),
        is_end,
        fenced: false,
    }
}

#[test]
fn an_executor_never_saw_a_run_only_if_it_neither_holds_it_nor_logged_it() {
    assert_eq!(Sighting::of(Ok(&chunk(0, false))), Sighting::MayHold);
    assert_eq!(Sighting::of(Ok(&chunk(3, false))), Sighting::MayHold);
    assert_eq!(Sighting::of(Ok(&chunk(2, true))), Sighting::Ran);
    assert_eq!(Sighting::of(Ok(&chunk(0, true))), Sighting::NeverSaw);
    assert_eq!(Sighting::of(Err(())), Sighting::MayHold);
    let fenced = |to_line, is_end| RunLogChunk {
        fenced: true,
        ..chunk(to_line, is_end)
    };
    assert_eq!(Sighting::of(Ok(&fenced(0, true))), Sighting::Fenced);
    // A log or a run in progress wins over a fence flag.
    assert_eq!(Sighting::of(Ok(&fenced(2, true))), Sighting::Ran);
    assert_eq!(Sighting::of(Ok(&fenced(0, false))), Sighting::MayHold);
}

#[test]
fn a_run_is_taken_over_through_the_fence_only_when_every_candidate_fenced_it() {
    let other = "http://127.0.0.1:9002".to_string();
    let said = |first: Sighting, second: Sighting| {
        vec![(ADDRESS.to_string(), first), (other.clone(), second)]
    };
    let mut answers: HashMap<LogId, Answers> = HashMap::new();
    answers.insert(LogId(1), said(Sighting::Fenced, Sighting::Fenced));
    // An executor that does not fence answers "never saw it" only: not enough.
    answers.insert(LogId(2), said(Sighting::Fenced, Sighting::NeverSaw));
    answers.insert(LogId(3), said(Sighting::Fenced, Sighting::MayHold));
    answers.insert(LogId(4), said(Sighting::Ran, Sighting::Fenced));
    answers.insert(LogId(5), vec![]);
    let probes = sort_answers(&answers, &HashSet::new());
    assert_eq!(probes.fenced, [LogId(1)].into());
    assert_eq!(probes.never_sent, [LogId(1), LogId(2)].into());
}

#[test]
fn a_stranded_run_is_sent_again_only_when_every_candidate_never_saw_it() {
    let other = "http://127.0.0.1:9002".to_string();
    let held_elsewhere: HashSet<String> = [other.clone()].into();
    let mut answers: HashMap<LogId, Answers> = HashMap::new();
    let never = |address: &str| (address.to_string(), Sighting::NeverSaw);
    answers.insert(LogId(1), vec![never(ADDRESS), never(&other)]);
    answers.insert(
        LogId(2),
        vec![never(ADDRESS), (other.clone(), Sighting::Ran)],
    );
    answers.insert(
        LogId(3),
        vec![(ADDRESS.into(), Sighting::MayHold), never(&other)],
    );
    answers.insert(
        LogId(4),
        vec![never(ADDRESS), (other.clone(), Sighting::MayHold)],
    );
    answers.insert(LogId(5), vec![]);
    let probes = sort_answers(&answers, &held_elsewhere);
    assert_eq!(probes.never_sent, [LogId(1)].into());
    // Absent from the executors held elsewhere (judged by the lost-run rules): 1, 2, 3, 5.
    assert_eq!(probes.absent, [1, 2, 3, 5].map(LogId).into());

    // A session of this admin listing the run overrides a "never saw it".
    let mut one = run(1, 0);
    one.executor_address = String::new();
    let mut two = run(2, 0);
    two.executor_address = String::new();
    let listing = [session("e1", T0, &[1])];
    let probes = StrandedProbes {
        never_sent: [LogId(1), LogId(2)].into(),
        ..StrandedProbes::default()
    };
    let (send, judge) = split_never_sent(vec![one.clone(), two.clone()], &listing, &probes);
    assert_eq!(send.iter().map(|r| r.id.0).collect::<Vec<_>>(), vec![2]);
    assert_eq!(judge.iter().map(|r| r.id.0).collect::<Vec<_>>(), vec![1]);
}

#[test]
fn a_run_left_out_of_heartbeats_is_lost_only_if_its_executor_confirms_it() {
    // Running or queued there, or no answer: the heartbeats were older than the run.
    assert_eq!(
        confirm(Sighting::MayHold, 1_000, PARAMS),
        Confirmation::Held
    );
    assert_eq!(
        confirm(Sighting::MayHold, 60_000, PARAMS),
        Confirmation::Held
    );
    // Never there: lost at once.
    assert_eq!(
        confirm(Sighting::NeverSaw, 1_000, PARAMS),
        Confirmation::Lost
    );
    // Over there: its result is on the way, unless it has not come for a lease.
    assert_eq!(confirm(Sighting::Ran, 1_000, PARAMS), Confirmation::Over);
    assert_eq!(confirm(Sighting::Ran, 3_100, PARAMS), Confirmation::Lost);
}

#[test]
fn a_run_its_executor_still_holds_is_suspected_again_only_after_another_interval() {
    let mut judge = LostJudge::default();
    let runs = [run(5, 200)];
    let lost = heartbeats(
        &mut judge,
        &runs,
        &[(T0 - 500, &[]), (T0 + 100, &[]), (T0 + 1_100, &[])],
    );
    assert_eq!(lost, vec![5]);
    // The executor said it holds the run: late heartbeats count from the next one again.
    judge.held_after_all(LogId(5));
    let lost = heartbeats(&mut judge, &runs, &[(T0 + 1_600, &[]), (T0 + 2_500, &[])]);
    assert!(lost.is_empty(), "missing for 900 ms since the answer");
    assert_eq!(heartbeats(&mut judge, &runs, &[(T0 + 2_600, &[])]), vec![5]);
}

#[test]
fn a_reconnecting_executor_keeps_its_runs() {
    let mut judge = LostJudge::default();
    let runs = [run(5, 200)];
    check(&mut judge, &runs, &[session("e1", T0, &[5])], &[], T0);
    assert!(check(&mut judge, &runs, &[], &[], T0 + 400).is_empty());
    // Back under a new session (within the grace) that lists the run again.
    let back = [session("e2", T0 + 2_800, &[])];
    assert!(check(&mut judge, &runs, &back, &[], T0 + 2_800).is_empty());
    let beat = [session("e2", T0 + 3_300, &[5])];
    assert!(check(&mut judge, &runs, &beat, &[], T0 + 3_300).is_empty());
    assert!(check(&mut judge, &runs, &beat, &[], T0 + 9_000).is_empty());
}
