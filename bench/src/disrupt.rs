//! What the failover workloads do to the cluster during the window: kill (F1) or stall (F2)
//! the admin holding the schedule lock several times, or restart the database once (F3). The
//! figures are computed afterwards from the log rows (`failover.rs`); the live checks here only
//! decide when to move on.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use xjob_admin::model::{GroupId, LogFilter, LogId, RunStatus};
use xjob_admin::store::Store;

use crate::admins::Admin;
use crate::clock::now_ms;
use crate::database::Database;
use crate::failover::{self, Disruption, LogRow};
use crate::grpc;

/// How many of the victim's planned fires are watched for adoption.
const WATCHED: usize = 16;

/// What F1/F2 need to find and hit the lock holder.
pub struct Target<'a> {
    pub store: &'a Store,
    pub group_id: i64,
    pub admins: &'a mut [Admin],
    pub node_lease: Duration,
    pub count: usize,
    pub spacing: Duration,
    /// No disruption starts unless it has time to play out before this instant.
    pub window_end_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SIGKILL, wait for a survivor to adopt the victim's fires, restart it.
    Kill,
    /// SIGSTOP for two node leases, then SIGCONT.
    Stall,
}

/// Disrupts the lock holder `target.count` times (fewer when the window is too short); returns
/// one record per disruption done.
pub async fn disrupt_lock_holders(
    target: &mut Target<'_>,
    kind: Kind,
) -> anyhow::Result<Vec<Disruption>> {
    let mut done = Vec::new();
    // A disruption plays out in about three leases plus a restart.
    let needed_ms = (target.node_lease * 3).as_millis() as i64 + 2_000;
    while done.len() < target.count {
        let at_ms = failover::next_instant_at_phase(now_ms(), fastrand::i64(0..1000));
        if at_ms + needed_ms > target.window_end_ms {
            eprintln!(
                "only {} of {} {kind:?}s fit in the window; a longer --duration fits more",
                done.len(),
                target.count
            );
            break;
        }
        sleep_until_ms(at_ms).await;
        let Some(disruption) = disrupt_once(target, kind).await? else {
            eprintln!("no admin owns a planned fire; trying again in a second");
            continue;
        };
        done.push(disruption);
        tokio::time::sleep(target.spacing).await;
    }
    Ok(done)
}

async fn disrupt_once(target: &mut Target<'_>, kind: Kind) -> anyhow::Result<Option<Disruption>> {
    let pending = planned_rows(target.store, target.group_id).await?;
    let nodes: Vec<String> = target
        .admins
        .iter()
        .map(|admin| admin.node_id().to_string())
        .collect();
    let node_refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let Some((victim, planned)) = failover::busiest_node(&pending, &node_refs) else {
        return Ok(None);
    };
    let watched = latest_planned(&pending, &planned, WATCHED);
    let admin = &mut target.admins[victim];
    let node = admin.node_id().to_string();
    let at_ms = now_ms();
    match kind {
        Kind::Kill => {
            admin.kill_9()?;
            let adopted = wait_adopted(target.store, &node, &watched, target.node_lease).await;
            admin.restart()?;
            grpc::connect(&admin.url(), Duration::from_secs(30)).await?;
            eprintln!(
                "killed {node} ({} planned fires); {}; restarted, up {} ms after the kill",
                planned.len(),
                describe_adoption(adopted, at_ms),
                now_ms() - at_ms
            );
        }
        Kind::Stall => {
            admin.pause()?;
            tokio::time::sleep(target.node_lease * 2).await;
            admin.resume()?;
            eprintln!(
                "stopped {node} ({} planned fires) for {} ms, then resumed it",
                planned.len(),
                now_ms() - at_ms
            );
        }
    }
    Ok(Some(Disruption {
        node,
        at_ms,
        planned,
    }))
}

fn describe_adoption(adopted_ms: Option<i64>, killed_ms: i64) -> String {
    match adopted_ms {
        Some(at_ms) => format!(
            "a survivor adopted its fires after ~{} ms",
            at_ms - killed_ms
        ),
        None => "no survivor adopted its fires in time".to_string(),
    }
}

/// The ids of up to `count` of `planned` scheduled last: those are still PENDING when a
/// survivor adopts them (the earliest ones may have been claimed by the victim meanwhile).
fn latest_planned(pending: &[LogRow], planned: &HashSet<i64>, count: usize) -> Vec<i64> {
    let mut rows: Vec<&LogRow> = pending
        .iter()
        .filter(|row| planned.contains(&row.id))
        .collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.scheduled_at_ms));
    rows.iter().take(count).map(|row| row.id).collect()
}

/// Polls the watched rows until another node owns one (adoption), for at most what takeover
/// can take (4/3 of the lease plus a sweep) with a wide margin; returns when it was seen.
async fn wait_adopted(store: &Store, node: &str, watched: &[i64], lease: Duration) -> Option<i64> {
    let bound = lease * 3 + Duration::from_secs(10);
    let adopted = || async move {
        for &id in watched {
            if let Ok(Some(row)) = store.get_log(LogId(id)).await
                && row.owner_node != node
            {
                return Some(now_ms());
            }
        }
        None
    };
    xjob_testkit::wait_until(bound, "another admin to adopt a watched fire", adopted)
        .await
        .ok()
}

/// The fires of the group planned and not yet dispatched: PENDING rows, and RUNNING rows with
/// no address (claimed, about to be sent: the coming second, late in a second).
async fn planned_rows(store: &Store, group_id: i64) -> anyhow::Result<Vec<LogRow>> {
    let mut planned = Vec::new();
    for status in [RunStatus::Pending, RunStatus::Running] {
        let filter = LogFilter {
            group_id: Some(GroupId(group_id)),
            status: Some(status),
            limit: 1_000_000,
            ..LogFilter::default()
        };
        let rows = store
            .list_logs(&filter)
            .await
            .map_err(|error| anyhow::anyhow!("cannot read the planned fires: {error}"))?;
        planned.extend(
            rows.iter()
                .filter(|row| row.executor_address.is_empty())
                .map(LogRow::from),
        );
    }
    Ok(planned)
}

/// Every log row of the group, read in pages once the admins have stopped writing.
pub async fn all_rows(store: &Store, group_id: i64) -> anyhow::Result<Vec<LogRow>> {
    const PAGE: i64 = 10_000;
    let mut by_id = BTreeMap::new();
    let mut offset = 0;
    loop {
        let filter = LogFilter {
            group_id: Some(GroupId(group_id)),
            offset,
            limit: PAGE,
            ..LogFilter::default()
        };
        let page = store
            .list_logs(&filter)
            .await
            .map_err(|error| anyhow::anyhow!("cannot read the log rows: {error}"))?;
        let full = page.len() as i64 == PAGE;
        for row in &page {
            by_id.insert(row.id, LogRow::from(row));
        }
        if !full {
            break;
        }
        offset += PAGE;
    }
    Ok(by_id.into_values().collect())
}

/// When F3 stopped and restarted the database.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    /// `stop` issued.
    pub stopped_ms: i64,
    /// `start` returned: the server accepts connections again.
    pub restarted_ms: i64,
}

/// Stops the database at a random sub-second phase after `at_ms`, keeps it down for `outage`,
/// starts it again on the same port.
pub async fn restart_database(
    database: &mut Database,
    at_ms: i64,
    outage: Duration,
) -> anyhow::Result<Restart> {
    sleep_until_ms(at_ms).await;
    // Flushed first, so the stop is quick and the outage is the one asked for.
    database.control("checkpoint")?;
    sleep_until_ms(failover::next_instant_at_phase(
        now_ms(),
        fastrand::i64(0..1000),
    ))
    .await;
    let stopped_ms = now_ms();
    database.control("stop")?;
    let stop_took_ms = now_ms() - stopped_ms;
    tokio::time::sleep(outage).await;
    database.control("start")?;
    let restarted_ms = now_ms();
    eprintln!(
        "database stopped (took {stop_took_ms} ms), down {} ms, accepting connections again",
        restarted_ms - stopped_ms
    );
    Ok(Restart {
        stopped_ms,
        restarted_ms,
    })
}

pub async fn sleep_until_ms(target_ms: i64) {
    let left = target_ms - now_ms();
    if left > 0 {
        tokio::time::sleep(Duration::from_millis(left as u64)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watched_fires_are_the_victims_latest() {
        let row = |id: i64, scheduled: i64| LogRow {
            id,
            job_id: id,
            scheduled_at_ms: scheduled,
            trigger_time_ms: 0,
            status: RunStatus::Pending,
            owner_node: "a".into(),
            shard_index: 0,
            covers_later: false,
        };
        let pending = vec![row(1, 1000), row(2, 5000), row(3, 3000), row(4, 9000)];
        let planned = HashSet::from([1, 2, 3]);
        assert_eq!(latest_planned(&pending, &planned, 2), vec![2, 3]);
    }
}
