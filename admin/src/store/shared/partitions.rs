//! Partitioned scheduling on the servers (`model::partition`): the partition rows, the share
//! each admin takes, and the schedule round over an admin's own partitions.
//!
//! Locks, in the order every statement takes them: the round takes the `schedule_lock` row
//! *shared* (so the rounds of partitioned admins do not exclude each other, but an admin of an
//! older release, which takes it exclusively for a round over every job, excludes them all),
//! then its own partition rows exclusively, ascending. Takes, releases and frees are
//! single-statement compare-and-sets outside any transaction: each waits at most for one round
//! of the row's owner and holds no other lock meanwhile, so nothing here can deadlock.
//!
//! SQLite keeps one scanning admin (its write lock is the schedule lock): every function here
//! answers "not partitioned" there and the scan runs `run_schedule_round` as before.

use super::rows::{JOB_COLUMNS, job_from_row};
use super::schedule::{missing_lock_row, plan_write_commit};
use crate::model::partition::{LiveNode, PARTITIONS, PartitionRow, rebalance};
use crate::model::{Job, LogId, NodeIdentity};
use crate::store::dialect::Dialect;
use crate::store::error::StoreResult;
use crate::store::round::RoundPlan;
use crate::store::sql::{Cols, Pools, Sql, commit};

/// Marks this node active, then takes free partitions up to its share or releases those above
/// it; returns the partitions this node owns afterwards, ascending. The share counts the
/// live-leased nodes marked active within `active_within_ms` (`model::partition::rebalance`).
/// `None` on SQLite (not partitioned).
pub async fn rebalance_partitions<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    active_within_ms: i64,
) -> StoreResult<Option<Vec<i64>>> {
    if DB::SINGLE_WRITER {
        return Ok(None);
    }
    let mut conn = db.write().await?;
    let now_ms: i64 = Sql::<DB>::new(format!("SELECT {}", DB::NOW_MS))
        .fetch_scalar(&mut *conn)
        .await?;
    let marked = Sql::<DB>::new("UPDATE xjob_node SET partitions_seen_ms = ")
        .bind(now_ms)
        .push(" WHERE node_id = ")
        .bind(node.node_id.as_str())
        .push(" AND epoch = ")
        .bind(node.epoch)
        .affected(&mut *conn)
        .await?;
    if marked == 0 {
        // Another start of this node took its epoch: this admin owns nothing any more.
        return Ok(Some(Vec::new()));
    }
    let active_since_ms = now_ms - active_within_ms;
    let live = Sql::<DB>::new(
        "SELECT node_id, epoch, partitions_seen_ms FROM xjob_node WHERE lease_until_ms >= ",
    )
    .bind(now_ms)
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|row| {
        let cols = Cols::<DB>(row);
        Ok(LiveNode {
            node_id: cols.get("node_id")?,
            epoch: cols.get("epoch")?,
            active: cols.get::<i64>("partitions_seen_ms")? >= active_since_ms,
        })
    })
    .collect::<StoreResult<Vec<LiveNode>>>()?;
    let rows = read_partitions::<DB>(&mut conn).await?;
    if rows.len() as i64 != PARTITIONS {
        return Err(crate::store::StoreError::Schema(format!(
            "xjob_partition holds {} rows, not {PARTITIONS}: re-run the migrations",
            rows.len()
        )));
    }
    let me = (node.node_id.as_str(), node.epoch);
    let decided = rebalance(&rows, &live, me);
    let mut owned = decided.keep;
    for row in &decided.take {
        if !take_one::<DB>(&mut conn, row, node).await? {
            // Another admin took it first: it is not ours.
            owned.retain(|part| *part != row.part_no);
        }
    }
    if !decided.release.is_empty() {
        let mut release = Sql::<DB>::new(
            "UPDATE xjob_partition SET owner_node = NULL, owner_epoch = 0 WHERE owner_node = ",
        );
        release.bind_mut(node.node_id.as_str());
        release.push_mut(" AND owner_epoch = ");
        release.bind_mut(node.epoch);
        release.push_mut(" AND part_no");
        DB::push_id_list(&mut release, &decided.release);
        release.execute(&mut *conn).await?;
    }
    Ok(Some(owned))
}

/// Every partition row, by number (none on SQLite): who plans which jobs, for tests and
/// operators.
pub async fn partition_owners<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<Vec<PartitionRow>> {
    read_partitions::<DB>(&mut *db.read().await?).await
}

/// Every partition row, by number.
async fn read_partitions<DB: Dialect>(conn: &mut DB::Connection) -> StoreResult<Vec<PartitionRow>> {
    Sql::<DB>::new("SELECT part_no, owner_node, owner_epoch FROM xjob_partition ORDER BY part_no")
        .fetch_all(conn)
        .await?
        .iter()
        .map(|row| {
            let cols = Cols::<DB>(row);
            let owner: Option<String> = cols.get("owner_node")?;
            let epoch: i64 = cols.get("owner_epoch")?;
            Ok(PartitionRow {
                part_no: cols.get("part_no")?,
                owner: owner.map(|node| (node, epoch)),
            })
        })
        .collect()
}

/// Sets this node as the owner of `row` if it still has the owner it was read with (the
/// compare-and-set that makes two admins taking the same free partition end with one owner).
async fn take_one<DB: Dialect>(
    conn: &mut DB::Connection,
    row: &PartitionRow,
    node: &NodeIdentity,
) -> StoreResult<bool> {
    let mut take = Sql::<DB>::new("UPDATE xjob_partition SET owner_node = ");
    take.bind_mut(node.node_id.as_str());
    take.push_mut(", owner_epoch = ");
    take.bind_mut(node.epoch);
    take.push_mut(" WHERE part_no = ");
    take.bind_mut(row.part_no);
    match &row.owner {
        None => take.push_mut(" AND owner_node IS NULL"),
        Some((owner, epoch)) => {
            take.push_mut(" AND owner_node = ");
            take.bind_mut(owner.clone());
            take.push_mut(" AND owner_epoch = ");
            take.bind_mut(*epoch);
        }
    }
    Ok(take.affected(conn).await? == 1)
}

/// Releases every partition of this node (a clean stop); returns how many.
pub async fn release_partitions<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
) -> StoreResult<u64> {
    free_owned::<DB>(db, node, "=").await
}

/// Frees the partitions of `dead` at its epochs up to its current one and clears its active
/// mark: the liveness watch found its process gone, so the survivors count it out of the share
/// and take its partitions at their next round instead of after its lease. Fenced like the rows
/// it frees: a round of `dead` still in progress holds them locked and this waits for it; a
/// later epoch of the node keeps its own. A live admin judged dead by mistake marks itself
/// again at its next round and takes a share again.
pub async fn free_partitions_of<DB: Dialect>(
    db: Pools<'_, DB>,
    dead: &NodeIdentity,
) -> StoreResult<u64> {
    if DB::SINGLE_WRITER {
        return Ok(0);
    }
    Sql::<DB>::new("UPDATE xjob_node SET partitions_seen_ms = 0 WHERE node_id = ")
        .bind(dead.node_id.as_str())
        .push(" AND epoch <= ")
        .bind(dead.epoch)
        .execute(&mut *db.write().await?)
        .await?;
    free_owned::<DB>(db, dead, "<=").await
}

async fn free_owned<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    epochs: &str,
) -> StoreResult<u64> {
    if DB::SINGLE_WRITER {
        return Ok(0);
    }
    Sql::<DB>::new(
        "UPDATE xjob_partition SET owner_node = NULL, owner_epoch = 0 WHERE owner_node = ",
    )
    .bind(node.node_id.as_str())
    .push(&format!(" AND owner_epoch {epochs} "))
    .bind(node.epoch)
    .affected(&mut *db.write().await?)
    .await
}

/// `run_schedule_round` over the jobs of `partitions` only, fenced on their ownership: it locks
/// the rows of those partitions this node/epoch still owns and reads only their jobs, so a
/// stalled admin whose partitions moved plans nothing there. Returns the jobs read and the id
/// of each planned run as `run_schedule_round` does.
pub async fn run_partition_round<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    partitions: &[i64],
    window_end_ms: i64,
    limit: i64,
    plan: &mut (dyn FnMut(Vec<Job>) -> RoundPlan + Send),
) -> StoreResult<(usize, Vec<Option<LogId>>)> {
    if partitions.is_empty() {
        return Ok((0, Vec::new()));
    }
    let waiting = std::time::Instant::now();
    let mut tx = db.begin().await?;
    let locked = Sql::<DB>::new(format!(
        "SELECT lock_name FROM xjob_lock WHERE lock_name = 'schedule_lock'{}",
        DB::FOR_SHARE
    ))
    .fetch_optional(&mut tx)
    .await?;
    if locked.is_none() {
        return Err(missing_lock_row());
    }
    let mut own = Sql::<DB>::new("SELECT part_no FROM xjob_partition WHERE owner_node = ");
    own.bind_mut(node.node_id.as_str());
    own.push_mut(" AND owner_epoch = ");
    own.bind_mut(node.epoch);
    own.push_mut(" AND part_no");
    DB::push_id_list(&mut own, partitions);
    own.push_mut(" ORDER BY part_no");
    own.push_mut(DB::FOR_UPDATE);
    let owned: Vec<i64> = own.fetch_column(&mut tx).await?;
    crate::metrics::observe_lock_wait(waiting.elapsed());
    let _held = crate::metrics::schedule_lock_held();
    if owned.is_empty() {
        commit(tx).await?;
        return Ok((0, Vec::new()));
    }
    let mut read = Sql::<DB>::new(format!(
        "SELECT {JOB_COLUMNS} FROM xjob_job WHERE trigger_status = 1 AND trigger_next_ms <= "
    ));
    read.bind_mut(window_end_ms);
    read.push_mut(&format!(" AND (id % {PARTITIONS})"));
    DB::push_id_list(&mut read, &owned);
    read.push_mut(" ORDER BY trigger_next_ms LIMIT ");
    read.bind_mut(limit);
    let jobs = read
        .fetch_all(&mut tx)
        .await?
        .iter()
        .map(job_from_row::<DB>)
        .collect::<StoreResult<Vec<Job>>>()?;
    plan_write_commit::<DB>(tx, jobs, plan).await
}
