//! Cluster scenarios with real processes: several `xjob` admin processes sharing one database,
//! executors (the SDK, in this test process) connected to them, jobs firing every second. Each
//! test crashes, stalls or cuts off part of the cluster, then checks every (job, scheduled
//! second) of its window against two independent records: what the handlers saw, and the log
//! rows in the database.
//!
//! Databases: PostgreSQL when `XJOB_TEST_POSTGRES_URL` is set (`.ci/run` sets it), MariaDB when
//! `XJOB_TEST_MYSQL_URL` is set; each test gets a fresh scratch database. Without a server URL
//! the scenarios that need no particular server run on one SQLite file shared by the admin
//! processes (its `BEGIN IMMEDIATE` serializes their schedule rounds as `SELECT … FOR UPDATE`
//! does on a server), and the PostgreSQL restart and MariaDB scenarios are skipped with a
//! message.
//!
//! The scenarios run one at a time (a process-wide lock): they measure timing on a 2-core
//! machine and would disturb each other. Durations and load are in `docs/operations.md`.

use crate::common;

use std::time::Duration;

use common::cluster::{
    Cluster, Database, Timing, Window, ceil_second, env_or_skip, list_executors, now_ms,
};
use common::wait_until;
use xjob_proto::pb;

// One scenario at a time, and never beside the timing scenarios of the other modules.
use common::ONE_AT_A_TIME;

// ---------------------------------------------------------------------------------------------
// The scenarios

/// 3 admins, 2 executors, 200 jobs every second: every (job, second) of the window fired
/// exactly once, while the admins compete for the schedule lock every second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_admins_fire_every_job_second_exactly_once() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres_or_shared_sqlite().await? else {
        return Ok(());
    };
    let mut cluster = Cluster::start(database, 3, 2, Timing::default()).await?;
    let outcome = async {
        cluster
            .create_jobs(200, pb::MisfireStrategy::DoNothing)
            .await?;
        let window = cluster.window_from_now(7_000, 20_000);
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print("three admins");
        ledger.assert_exactly_once()?;
        cluster.assert_admins_shared_the_schedule(&window).await
    }
    .await;
    cluster.finish(outcome).await
}

/// The admin owning the most planned fires (the one that last held the schedule lock) is
/// killed with SIGKILL ten times at random moments and restarted after each takeover: no fire
/// is missed or duplicated, and the takeover time is measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_lock_holder_ten_times_loses_and_duplicates_nothing() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres_or_shared_sqlite().await? else {
        return Ok(());
    };
    let mut cluster = Cluster::start(database, 3, 2, Timing::default()).await?;
    let outcome = async {
        cluster
            .create_jobs(50, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms).await?;
        let mut takeovers = Vec::new();
        for round in 1..=10 {
            let pause = Duration::from_millis(fastrand::u64(300..1_300));
            tokio::time::sleep(pause).await;
            let takeover = cluster.kill_lock_holder_and_restart().await?;
            eprintln!("kill {round}: takeover {takeover:?}");
            takeovers.extend(takeover);
        }
        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 2_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print("ten kills");
        print_takeovers(&takeovers);
        anyhow::ensure!(!takeovers.is_empty(), "no takeover was measured");
        ledger.assert_exactly_once()
    }
    .await;
    cluster.finish(outcome).await
}

/// Issue 17, item 3: with the default node lease (10 s), a SIGKILLed admin's planned fires are
/// dispatched by a survivor long before its lease lapses, because its liveness lock (released
/// with its database session or lock file) says it died; what it had claimed but not sent is
/// sent by its restart; nothing is lost or run twice. On one SQLite file shared by the admin
/// processes, PostgreSQL and MariaDB. The figures are printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn takeover_before_the_lease_sqlite() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::sqlite()? else {
        return Ok(());
    };
    takeover_before_the_lease(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn takeover_before_the_lease_postgres() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres().await? else {
        return Ok(());
    };
    takeover_before_the_lease(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn takeover_before_the_lease_mariadb() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    takeover_before_the_lease(database).await
}

async fn takeover_before_the_lease(database: Database) -> anyhow::Result<()> {
    const KILLS: usize = 5;
    let label = database.label;
    let timing = Timing {
        node_lease: Duration::from_secs(10),
        executor_lease: Duration::from_secs(30),
        ..Timing::default()
    };
    let mut cluster = Cluster::start(database, 2, 2, timing).await?;
    let outcome = async {
        cluster
            .create_jobs(50, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms).await?;
        let mut takeovers = Vec::new();
        for round in 1..=KILLS {
            tokio::time::sleep(Duration::from_millis(fastrand::u64(1_000..2_000))).await;
            let takeover = cluster.kill_lock_holder_and_restart().await?;
            eprintln!("{label}, kill {round}: takeover {takeover:?}");
            takeovers.extend(takeover);
        }
        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 2_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print(&format!("{KILLS} kills with a 10 s node lease on {label}"));
        print_takeovers(&takeovers);
        eprintln!(
            "adopted delay (latest dispatch by a survivor of a victim's planned fire, after its \
             second), per kill: {:?} ms",
            cluster.adopted_delays_ms().await?
        );
        eprintln!(
            "load: {}",
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
        anyhow::ensure!(
            takeovers.len() >= 3,
            "only {} takeovers measured",
            takeovers.len()
        );
        let max = takeovers.iter().max().map_or(0, Duration::as_millis);
        // By the lease alone a takeover needs the victim's lease to lapse: at least 10 s less
        // the renewal period (node_lease / 3), so over 6.6 s. With the liveness lock it is the
        // wait for the victim's next fire still PENDING (the coming second may already be
        // claimed: claimed runs wait for the victim's restart) plus a watch period; measured
        // 0.2-3 s. The bound says the lock, not the lease, did it every time; how fast it is,
        // is the benchmark's to report (issue 17, F1), not this test's.
        anyhow::ensure!(max < 6_000, "{label}: takeover max {max} ms");
        ledger.assert_exactly_once()
    }
    .await;
    cluster.finish(outcome).await
}

/// Two admins, 50 jobs every second (DO_NOTHING, no retries), the default 10 s node lease.
/// Three times an admin is SIGKILLed late in a second, between claiming the coming second's
/// fires and sending them, and restarted only 7 s later, past the misfire threshold (5 s). The
/// survivor finds its liveness lock released, has every executor fence those claimed runs
/// against the dead admin, takes them over and sends them: every fire runs exactly once. Before
/// the fence they waited for the victim's lease or its restart, and were recorded as misfires.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimed_runs_of_a_killed_admin_are_sent_through_the_fence_sqlite() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::sqlite()? else {
        return Ok(());
    };
    claimed_runs_sent_through_the_fence(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimed_runs_of_a_killed_admin_are_sent_through_the_fence_postgres() -> anyhow::Result<()>
{
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres().await? else {
        return Ok(());
    };
    claimed_runs_sent_through_the_fence(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimed_runs_of_a_killed_admin_are_sent_through_the_fence_mariadb() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    claimed_runs_sent_through_the_fence(database).await
}

async fn claimed_runs_sent_through_the_fence(database: Database) -> anyhow::Result<()> {
    const KILLS: usize = 3;
    let label = database.label;
    let timing = Timing {
        node_lease: Duration::from_secs(10),
        executor_lease: Duration::from_secs(30),
        ..Timing::default()
    };
    let mut cluster = Cluster::start(database, 2, 2, timing).await?;
    cluster.retries = 0;
    let outcome = async {
        cluster
            .create_jobs(50, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms).await?;
        for round in 0..KILLS {
            // Inside the claim's lead: the ring claims a second's fires 200 ms before it and
            // sends them at the second.
            let second = ceil_second(now_ms() + fastrand::i64(2_000..3_000));
            cluster
                .wait_until_ms(second - fastrand::i64(30..150))
                .await?;
            let victim = round % 2;
            cluster.admins[victim].kill_9()?;
            eprintln!(
                "kill {}: {} ms before a second",
                round + 1,
                second - now_ms()
            );
            tokio::time::sleep(Duration::from_secs(7)).await;
            cluster.admins[victim].restart()?;
            common::connect(&cluster.admins[victim].spec.url()).await?;
        }
        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 2_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print(&format!("{KILLS} kills between claim and send on {label}"));
        let mut fenced = Vec::new();
        for index in 1..=cluster.admins.len() {
            let log =
                std::fs::read_to_string(cluster.dir.path().join(format!("admin-{index}.log")))?;
            fenced.extend(
                log.lines()
                    .filter(|line| line.contains("taking them over"))
                    .map(str::to_string),
            );
        }
        eprintln!("{} fenced take-overs: {fenced:?}", fenced.len());
        anyhow::ensure!(
            !fenced.is_empty(),
            "{label}: no claimed run was taken over through the fence"
        );
        ledger.assert_exactly_once()
    }
    .await;
    cluster.finish(outcome).await
}

/// Issue 11, item 3: one admin, 50 jobs every second without retries, SIGKILLed ten times at
/// random moments late in a second (where the ring has claimed the coming second's fires and
/// not yet sent them) and restarted each time; on SQLite, then on PostgreSQL when
/// `XJOB_TEST_POSTGRES_URL` is set. Every fire ran exactly once or is recorded as a misfire
/// with its reason: what the killed admin claimed but never sent is sent by its restart, never
/// left LOST, never run twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_between_claim_and_send_ten_times_every_fire_runs_once() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    if let Some(database) = Database::sqlite()? {
        kill_between_claim_and_send(database, 10).await?;
    }
    if let Some(database) = Database::postgres().await? {
        kill_between_claim_and_send(database, 10).await?;
    }
    Ok(())
}

async fn kill_between_claim_and_send(database: Database, kills: usize) -> anyhow::Result<()> {
    let label = database.label;
    let mut cluster = Cluster::start(database, 1, 2, Timing::default()).await?;
    cluster.retries = 0;
    let outcome = async {
        cluster
            .create_jobs(50, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms).await?;
        for round in 1..=kills {
            // A random moment in the last 300 ms of a second, 2 to 4 s from now: the ring
            // claims the coming second's fires 200 ms before it and sends them at the second.
            let second = ceil_second(now_ms() + fastrand::i64(2_000..4_000));
            let kill_at = second - fastrand::i64(1..300);
            cluster.wait_until_ms(kill_at).await?;
            cluster.admins[0].kill_9()?;
            eprintln!("kill {round}: {} ms before a second", second - now_ms());
            cluster.admins[0].restart()?;
            common::connect(&cluster.admins[0].spec.url()).await?;
        }
        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 2_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print(&format!("{kills} kills between claim and send on {label}"));
        let log = std::fs::read_to_string(cluster.dir.path().join("admin-1.log"))?;
        let takeovers: Vec<&str> = log
            .lines()
            .filter(|line| line.contains("claimed but never sent"))
            .collect();
        eprintln!(
            "{} take-overs of claimed, unsent runs: {takeovers:?}",
            takeovers.len()
        );
        // A kill in the last 200 ms of a second strands that second (P(no such kill) < 1e-4).
        anyhow::ensure!(
            !takeovers.is_empty(),
            "no kill landed between claim and send"
        );
        ledger.assert_fired_or_misfired()
    }
    .await;
    cluster.finish(outcome).await
}

/// An admin frozen with SIGSTOP past its node lease loses its planned fires to the others;
/// after SIGCONT it cannot dispatch any of them a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_admin_cannot_dispatch_adopted_fires() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres_or_shared_sqlite().await? else {
        return Ok(());
    };
    let timing = Timing::default();
    let mut cluster = Cluster::start(database, 3, 2, timing).await?;
    let outcome = async {
        cluster
            .create_jobs(50, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms + 2_000).await?;
        // A stall that lands while the admin holds the database lock (a write on SQLite, a
        // schedule round anywhere) freezes every admin with it, and nothing is adopted; the
        // scenario then stalls again at another moment.
        // The adoption is awaited while the admin is frozen (others adopt once its lease has
        // run out), not checked once after a fixed stall; the stall stays shorter than the
        // executor lease and the misfire threshold, so it disturbs nothing else.
        let mut adopted = 0;
        for attempt in 1..=3 {
            let (victim, owned) = cluster.lock_holder().await?;
            let node = cluster.admins[victim].spec.node_id.clone();
            let frozen_at = std::time::Instant::now();
            cluster.admins[victim].pause()?;
            let adoption = wait_until(
                timing.node_lease * 2 + Duration::from_secs(1),
                "another admin to adopt a fire of the frozen one",
                || async {
                    let adopted = cluster.adopted_from(&node, &owned).await.ok()?;
                    (adopted > 0).then_some(adopted)
                },
            )
            .await;
            cluster.admins[victim].resume()?;
            adopted = adoption.unwrap_or(0);
            eprintln!(
                "stall {attempt}: {node} frozen for {:?}; it owned {} planned fires, {adopted} \
                 were adopted by others",
                frozen_at.elapsed(),
                owned.len(),
            );
            if adopted > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(fastrand::u64(300..1_300))).await;
        }
        anyhow::ensure!(
            adopted > 0,
            "no fire of a stalled admin was adopted in 3 stalls"
        );
        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 3_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print("stalled admin");
        // A fire the stalled admin was sending when it froze may never reach the executor: it
        // ends LOST and its retry runs it, once.
        ledger.assert_no_duplicate()?;
        ledger.assert_exactly_once()
    }
    .await;
    cluster.finish(outcome).await
}

/// PostgreSQL is stopped under load for longer than the node lease and the misfire threshold,
/// then started again: every admin reports NOT_SERVING while it is away and SERVING after, the
/// cluster recovers without help, nothing runs twice, and every scheduled second is either fired
/// or recorded as a misfire.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restart_under_load_recovers_without_duplicates() -> anyhow::Result<()> {
    let timing = Timing {
        misfire_threshold: Duration::from_secs(2),
        ..Timing::default()
    };
    // Longer than the node lease (admins adopt each other's fires) and than a connection
    // wait (5 s: calls fail instead of waiting), so fires become misfires.
    let outage = Duration::from_secs(8);
    let Some(ledger) = postgres_outage("postgresql restart", timing, outage).await? else {
        return Ok(());
    };
    anyhow::ensure!(
        ledger.skipped > 0,
        "a {outage:?} outage with a 2 s misfire threshold recorded no misfire"
    );
    Ok(())
}

/// A PostgreSQL outage longer than a connection wait (5 s: claims then fail instead of
/// waiting) but shorter than the node lease: no admin looks dead, so nobody adopts the fires
/// whose claims failed meanwhile; their owners must dispatch them (or record them as misfires)
/// themselves once the database is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_outage_within_the_node_lease_leaves_no_fire_behind() -> anyhow::Result<()> {
    // Renewals blocked on the database delay the next ones (each call waits up to 5 s), so the
    // lease is far longer than the outage.
    let timing = Timing {
        node_lease: Duration::from_secs(60),
        executor_lease: Duration::from_secs(18),
        misfire_threshold: Duration::from_secs(2),
        ..Timing::default()
    };
    let outage = Duration::from_secs(7);
    postgres_outage("outage within the node lease", timing, outage).await?;
    Ok(())
}

/// 3 admins and 50 jobs on PostgreSQL, the server stopped for `outage` mid-window: checks
/// health and reflection during the outage, no duplicate, and every second fired once or
/// recorded as a misfire; returns the ledger (None when skipped).
async fn postgres_outage(
    scenario: &str,
    timing: Timing,
    outage: Duration,
) -> anyhow::Result<Option<common::ledger::Ledger>> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres().await? else {
        return Ok(None);
    };
    let Some(ctl) = env_or_skip("XJOB_TEST_POSTGRES_CTL", "restarting PostgreSQL") else {
        return Ok(None);
    };
    let mut cluster = Cluster::start(database, 3, 2, timing).await?;
    let outcome = async {
        cluster
            .create_jobs(50, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms + 2_000).await?;
        cluster.cut_database(&ctl, outage).await?;
        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 6_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print(scenario);
        ledger.assert_no_duplicate()?;
        ledger.assert_fired_or_misfired()?;
        Ok(ledger)
    }
    .await;
    let ledger = match outcome {
        Ok(ledger) => Some(ledger),
        Err(error) => return cluster.finish(Err(error)).await.map(|()| None),
    };
    cluster.finish(Ok(())).await?;
    Ok(ledger)
}

/// Every admin lists (and routes to) every executor of the cluster with the admin holding its
/// session; when that admin dies, the executor moves to another one and never leaves the list.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_admin_lists_every_executor_and_keeps_it_through_a_handover() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres_or_shared_sqlite().await? else {
        return Ok(());
    };
    let mut cluster = Cluster::start(database, 3, 2, Timing::default()).await?;
    let outcome = async {
        // Executor i starts its admin list at admin i + 1.
        let expected: Vec<(String, String)> = cluster
            .executors
            .iter()
            .enumerate()
            .map(|(index, executor)| {
                (
                    executor.address().to_string(),
                    format!("admin-{}", index + 1),
                )
            })
            .collect();
        for admin in &cluster.admins {
            let url = admin.spec.url();
            let what = format!(
                "{} to list both executors with their admins",
                admin.spec.node_id
            );
            wait_until(Duration::from_secs(10), &what, || async {
                let listed = list_executors(&url).await?;
                let mut wanted = expected.clone();
                wanted.sort();
                (listed == wanted).then_some(())
            })
            .await?;
        }
        let moved = expected[0].0.clone();
        cluster.admins[0].kill_9()?;
        let survivors: Vec<String> = cluster.admins[1..].iter().map(|a| a.spec.url()).collect();
        // Listed at every moment of the handover: the dead admin's row stays routable until
        // the executor's new session replaces it.
        let handover = wait_until(
            Duration::from_secs(15),
            "the executor to move to a survivor",
            || async {
                let mut holders = Vec::new();
                for url in &survivors {
                    let listed = list_executors(url).await?;
                    let holder = listed
                        .iter()
                        .find(|(address, _)| *address == moved)
                        .map(|(_, node)| node.clone());
                    match holder {
                        Some(node) => holders.push(node),
                        None => return Some(Err(format!("{url} lost {moved}: {listed:?}"))),
                    }
                }
                let moved_everywhere = holders.iter().all(|node| node != "admin-1");
                moved_everywhere.then(|| Ok(holders[0].clone()))
            },
        )
        .await?;
        let new_holder =
            handover.map_err(|lost| anyhow::anyhow!("executor left the list: {lost}"))?;
        eprintln!("executor {moved} moved from admin-1 to {new_holder}");
        Ok(())
    }
    .await;
    cluster.finish(outcome).await
}

/// MariaDB with 2 admins: every (job, second) fired exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_two_admins_fire_exactly_once() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    let mut cluster = Cluster::start(database, 2, 2, Timing::default()).await?;
    let outcome = async {
        cluster
            .create_jobs(100, pb::MisfireStrategy::DoNothing)
            .await?;
        let window = cluster.window_from_now(7_000, 10_000);
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print("mariadb");
        ledger.assert_exactly_once()
    }
    .await;
    cluster.finish(outcome).await
}

/// Node leases are written and judged by the database's clock. Two admins, each with a clock
/// offset file (`XJOB_TEST_CLOCK_OFFSET_FILE`): the admin owning planned fires has its clock
/// stepped back further than the node lease, then the other admin has its clock stepped ahead
/// as far. Judged by their own clocks, the other admin would take the owner's planned fires
/// within a lease (a live lease stolen, and the claimed-but-unsent runs of such an admin are
/// sent twice); judged by the database's, nothing changes hands and nothing runs twice. On one
/// SQLite file shared by the admin processes (its clock is the machine's), PostgreSQL and
/// MariaDB.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stepped_clock_takes_no_live_lease_sqlite() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::sqlite()? else {
        return Ok(());
    };
    a_stepped_clock_takes_no_live_lease(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stepped_clock_takes_no_live_lease_postgres() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres().await? else {
        return Ok(());
    };
    a_stepped_clock_takes_no_live_lease(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stepped_clock_takes_no_live_lease_mariadb() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    a_stepped_clock_takes_no_live_lease(database).await
}

async fn a_stepped_clock_takes_no_live_lease(database: Database) -> anyhow::Result<()> {
    /// Four node leases of the default timing (2 s).
    const STEP_MS: i64 = 8_000;
    let timing = Timing::default();
    let clock_file = |dir: &std::path::Path, index: usize| dir.join(format!("clock-{index}"));
    let env = |dir: &std::path::Path, index: usize| {
        let file = clock_file(dir, index).display().to_string();
        vec![("XJOB_TEST_CLOCK_OFFSET_FILE".to_string(), file)]
    };
    let mut cluster = Cluster::start_with_env(database, 2, 2, timing, "", env).await?;
    let outcome = async {
        cluster
            .create_jobs(50, pb::MisfireStrategy::DoNothing)
            .await?;
        let start_ms = cluster.window_from_now(5_000, 0).start_ms;
        cluster.wait_until_ms(start_ms).await?;
        for step_back in [true, false] {
            let (holder, owned) = wait_until(
                Duration::from_secs(10),
                "an admin owning planned fires",
                || async {
                    let (holder, owned) = cluster.lock_holder().await.ok()?;
                    (owned.len() >= 10).then_some((holder, owned))
                },
            )
            .await?;
            let node = cluster.admins[holder].spec.node_id.clone();
            // Admins are numbered from 1; the other of two is `1 - holder` by position.
            let (stepped, step_ms) = match step_back {
                true => (holder, -STEP_MS),
                false => (1 - holder, STEP_MS),
            };
            let file = clock_file(cluster.dir.path(), stepped + 1);
            std::fs::write(&file, step_ms.to_string())?;
            // Judged by the admins' own clocks, the other admin takes planned fires of the
            // holder within a lease and an adoption period; three leases are waited for.
            let taken = wait_until(
                timing.node_lease * 3,
                "the other admin to take planned fires of a live admin",
                || async {
                    let taken = taken_from(&cluster, &node, &owned, step_back).await.ok()?;
                    (taken > 0).then_some(taken)
                },
            )
            .await;
            std::fs::write(&file, "0")?;
            eprintln!(
                "clock of admin-{} stepped {step_ms} ms; {node} owned {} planned fires; taken \
                 by the other admin: {}",
                stepped + 1,
                owned.len(),
                taken.as_ref().map_or(0, |taken| *taken),
            );
            if let Ok(taken) = taken {
                anyhow::bail!(
                    "{taken} planned fires of the live {node} were taken over after a clock \
                     step of {step_ms} ms"
                );
            }
        }
        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 2_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print("stepped clocks");
        ledger.assert_no_duplicate()
    }
    .await;
    cluster.finish(outcome).await
}

/// How many of `owned` (planned fires of the live `node`) the other admin has taken. Any admin
/// claims the follow-up of a finished run, which makes it the row's owner too, so a change of
/// owner alone is a take-over only while the holder cannot have run the fire: its clock stepped
/// back further than the wait (`holder_stepped_back`). Otherwise only a fire still PENDING
/// under the other owner counts (a follow-up claim needs a finished run; a late dispatch by
/// the holder on a loaded machine is no take-over).
async fn taken_from(
    cluster: &Cluster,
    node: &str,
    owned: &std::collections::HashSet<i64>,
    holder_stepped_back: bool,
) -> anyhow::Result<usize> {
    let rows = cluster.rows().await?;
    Ok(rows
        .iter()
        .filter(|row| owned.contains(&row.id.0) && row.owner_node != node)
        .filter(|row| holder_stepped_back || row.status == xjob_admin::model::RunStatus::Pending)
        .count())
}

fn print_takeovers(takeovers: &[Duration]) {
    let mut millis: Vec<u128> = takeovers.iter().map(Duration::as_millis).collect();
    millis.sort_unstable();
    if let (Some(min), Some(max)) = (millis.first(), millis.last()) {
        let median = millis[millis.len() / 2];
        eprintln!(
            "takeover (kill -> first fire of the killed admin dispatched by a survivor), {} \
             kills: min {min} ms, median {median} ms, max {max} ms",
            millis.len()
        );
    }
}
