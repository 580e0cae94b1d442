//! Partitioned scheduling with real admin processes on PostgreSQL and MariaDB: three admins
//! split the 256 partitions three ways and each plans the jobs of its own; a SIGKILLed admin's
//! partitions move to the survivors (split two ways), and back to three when it restarts; every
//! (job, second) of the window, kill included, fired exactly once.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::ONE_AT_A_TIME;
use common::cluster::{Cluster, Database, Timing, Window, ceil_second, now_ms};
use common::wait_until;
use xjob_admin::model::partition::partition_of;
use xjob_proto::pb;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn partitions_split_and_move_on_a_kill_postgres() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres().await? else {
        return Ok(());
    };
    split_and_move(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn partitions_split_and_move_on_a_kill_mariadb() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    split_and_move(database).await
}

/// Jobs saved while the partitions are still moving (three admins that just started, idle
/// until then) fire on time: each admin rounds at least once a second, so a partition released
/// at a join is taken, and a job saved through another admin is planned by its owner, well
/// inside the window the previous owner planned ahead. With the short misfire threshold, a fire
/// left unplanned for a few seconds would show as a misfire.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_saved_while_partitions_move_fire_on_time_postgres() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::postgres().await? else {
        return Ok(());
    };
    saved_while_moving(database).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_saved_while_partitions_move_fire_on_time_mariadb() -> anyhow::Result<()> {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(database) = Database::mariadb().await? else {
        return Ok(());
    };
    saved_while_moving(database).await
}

async fn saved_while_moving(database: Database) -> anyhow::Result<()> {
    let label = database.label;
    let timing = Timing {
        misfire_threshold: Duration::from_millis(1_500),
        ..Timing::default()
    };
    let mut cluster = Cluster::start(database, 3, 2, timing).await?;
    let outcome = async {
        cluster
            .create_jobs(60, pb::MisfireStrategy::DoNothing)
            .await?;
        // StartJob sets a job's first fire 5 s ahead: the window opens with the last job's.
        let window = cluster.window_from_now(5_000, 6_000);
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print(&format!("saved while partitions move, {label}"));
        ledger.assert_exactly_once()
    }
    .await;
    cluster.finish(outcome).await
}

async fn split_and_move(database: Database) -> anyhow::Result<()> {
    let label = database.label;
    let mut cluster = Cluster::start(database, 3, 2, Timing::default()).await?;
    let outcome = async {
        cluster
            .create_jobs(120, pb::MisfireStrategy::DoNothing)
            .await?;
        let all = ["admin-1", "admin-2", "admin-3"];
        wait_for_split(&cluster, &all).await?;
        // Past the last job's first fire (5 s after its StartJob), however soon the split
        // settled.
        let start_ms = cluster.window_from_now(6_000, 0).start_ms;
        cluster.wait_until_ms(start_ms + 4_000).await?;
        // Each job's fires of a settled stretch were planned by its partition's owner.
        assert_planned_by_owners(&cluster, start_ms, start_ms + 3_000).await?;

        cluster.admins[1].kill_9()?;
        let survivors = ["admin-1", "admin-3"];
        wait_for_split(&cluster, &survivors).await?;
        cluster.admins[1].restart()?;
        common::connect(&cluster.admins[1].spec.url()).await?;
        wait_for_split(&cluster, &all).await?;

        let window = Window {
            start_ms,
            end_ms: ceil_second(now_ms()) + 3_000,
        };
        cluster.wait_past(&window).await?;
        let ledger = cluster.settled_ledger(&window).await?;
        ledger.print(&format!("partitions, {label}"));
        ledger.assert_exactly_once()
    }
    .await;
    cluster.finish(outcome).await
}

/// Waits until the partitions are split between `nodes` only, none free, each holding its
/// share `ceil(256 / n)` or what the others' shares leave (three admins: 86, 86, 84).
async fn wait_for_split(cluster: &Cluster, nodes: &[&str]) -> anyhow::Result<()> {
    let share = 256_usize.div_ceil(nodes.len());
    let floor = 256 - share * (nodes.len() - 1);
    let what = format!("the 256 partitions to be split between {nodes:?}");
    let counts = wait_until(Duration::from_secs(30), &what, || async {
        let counts = owner_counts(cluster).await.ok()?;
        let split = counts.len() == nodes.len()
            && nodes.iter().all(|node| {
                counts
                    .get(*node)
                    .is_some_and(|count| (floor..=share).contains(count))
            });
        split.then_some(counts)
    })
    .await?;
    eprintln!("partitions per admin: {counts:?}");
    Ok(())
}

/// Partitions per owner node (`-` for free ones).
async fn owner_counts(cluster: &Cluster) -> anyhow::Result<BTreeMap<String, usize>> {
    let mut counts = BTreeMap::new();
    for row in cluster.store.partition_owners().await? {
        let owner = row.owner.map(|(node, _)| node).unwrap_or("-".into());
        *counts.entry(owner).or_default() += 1;
    }
    Ok(counts)
}

/// Every fire scheduled in `[from_ms, to_ms)` was written by the admin that owns its job's
/// partition now (no kill happened in that stretch), and all three admins planned some.
async fn assert_planned_by_owners(
    cluster: &Cluster,
    from_ms: i64,
    to_ms: i64,
) -> anyhow::Result<()> {
    let owners: HashMap<i64, String> = cluster
        .store
        .partition_owners()
        .await?
        .into_iter()
        .filter_map(|row| row.owner.map(|(node, _)| (row.part_no, node)))
        .collect();
    let mut planned_by: BTreeMap<String, usize> = BTreeMap::new();
    for row in cluster.rows().await? {
        if row.scheduled_at_ms < from_ms || row.scheduled_at_ms >= to_ms {
            continue;
        }
        let owner = owners.get(&partition_of(row.job_id.0));
        anyhow::ensure!(
            owner == Some(&row.owner_node) || row.owner_node.is_empty(),
            "job {} (partition {}) fired at {} was planned by {}, its partition is {:?}'s",
            row.job_id.0,
            partition_of(row.job_id.0),
            row.scheduled_at_ms,
            row.owner_node,
            owner
        );
        *planned_by.entry(row.owner_node.clone()).or_default() += 1;
    }
    eprintln!("fires planned per admin: {planned_by:?}");
    anyhow::ensure!(
        planned_by.len() == 3,
        "not every admin planned: {planned_by:?}"
    );
    Ok(())
}
