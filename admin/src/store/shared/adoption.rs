//! Taking over the rows of admins that are gone: PENDING fires and follow-up claims of dead
//! nodes and of this node's older epochs, and the runs such an admin claimed but never sent.

use super::claims::{Lock, unindexed, update_logs};
use super::raw_ids;
use super::rows::{LOG_COLUMNS, run_from_row};
use crate::model::{LogId, NodeIdentity, RunLog};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Pools, Sql, commit};

/// Who counts as gone: this node's epochs before `epoch` (`own_epochs` is `<`, or `<=` to
/// include the current one) and every other node whose lease lapsed before `now_ms`.
struct GoneOwner<'q> {
    node_id: &'q str,
    epoch: i64,
    own_epochs: &'static str,
    now_ms: i64,
    /// The lapsed nodes, read first where the dialect names them as a list.
    listed: Option<Vec<String>>,
    /// When set, other nodes' rows count only if claimed before this instant (their dispatch
    /// may still be in flight); this node's earlier epochs are gone for good, so theirs count
    /// at once.
    others_claimed_before_ms: Option<i64>,
}

/// How `GoneOwner::new` reads the lapsed nodes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lapsed {
    /// As any read does (listed only where the dialect names them as a list).
    Read,
    /// For a take-over that a renewal of the owner's lease must not overtake: listed with a
    /// shared lock on their rows, held by the transaction until it ends. A renewal
    /// (`renew_node`, an update of the row) then waits until the take-over has committed, and
    /// a renewal that committed first keeps its node out of the list (a locking read sees the
    /// newest row). Why: an owner whose lease lapsed sends its claimed runs once it has
    /// renewed and read them still its own (`Trigger::send_allowed`). Judged on a list read
    /// before the update, or on a subquery's snapshot while the update waited for a row lock,
    /// a renewal could land in between: the owner read the run still its own and sent it, and
    /// the take-over then took it as well (sent twice, or recorded SKIPPED although it ran).
    /// SQLite has one writer: its single update cannot interleave with a renewal, so there
    /// this reads as `Read` does.
    Locked,
}

impl<'q> GoneOwner<'q> {
    /// The owners gone for `node_id` in `epoch`, judged by `now_ms`; the lapsed nodes read as
    /// `lapsed` says (one query, locking or not).
    async fn new<DB: Dialect>(
        conn: &mut DB::Connection,
        node_id: &'q str,
        epoch: i64,
        own_epochs: &'static str,
        now_ms: i64,
        lapsed: Lapsed,
    ) -> StoreResult<GoneOwner<'q>> {
        let locked = lapsed == Lapsed::Locked && !DB::SINGLE_WRITER;
        let listed = if locked || DB::GONE_NODES_AS_LIST {
            let mut select =
                Sql::<DB>::new("SELECT node_id FROM xjob_node WHERE lease_until_ms < ");
            select.bind_mut(now_ms);
            select.push_mut(" AND node_id <> ");
            select.bind_mut(node_id);
            if locked {
                select.push_mut(" ORDER BY node_id");
                select.push_mut(DB::FOR_SHARE);
            }
            Some(select.fetch_column::<String>(conn).await?)
        } else {
            None
        };
        Ok(GoneOwner {
            node_id,
            epoch,
            own_epochs,
            now_ms,
            listed,
            others_claimed_before_ms: None,
        })
    }

    /// ` AND ((owner_node = this AND epoch < e) OR owner_node IN (gone nodes))`, the second
    /// branch prefixed with `trigger_time_ms < t AND` when `others_claimed_before_ms` is set.
    fn push<DB: Dialect>(&self, sql: &mut Sql<'q, DB>) {
        sql.push_mut(" AND ((owner_node = ");
        sql.bind_mut(self.node_id);
        sql.push_mut(&format!(" AND epoch {} ", self.own_epochs));
        sql.bind_mut(self.epoch);
        sql.push_mut(")");
        let others_from = |sql: &mut Sql<'q, DB>| {
            sql.push_mut(" OR (");
            if let Some(claimed_before_ms) = self.others_claimed_before_ms {
                sql.push_mut("trigger_time_ms < ");
                sql.bind_mut(claimed_before_ms);
                sql.push_mut(" AND ");
            }
        };
        match &self.listed {
            None => {
                others_from(sql);
                sql.push_mut(
                    "owner_node IN (SELECT node_id FROM xjob_node WHERE lease_until_ms < ",
                );
                sql.bind_mut(self.now_ms);
                sql.push_mut(" AND node_id <> ");
                sql.bind_mut(self.node_id);
                sql.push_mut("))");
            }
            Some(nodes) if !nodes.is_empty() => {
                others_from(sql);
                sql.push_mut("owner_node IN (");
                for (index, node) in nodes.iter().enumerate() {
                    if index > 0 {
                        sql.push_mut(", ");
                    }
                    sql.bind_mut(node.clone());
                }
                sql.push_mut("))");
            }
            Some(_) => {}
        }
        sql.push_mut(")");
    }
}

/// Sets this node/epoch as owner of the rows `condition` (a status test) selects among those of
/// gone owners; returns them by id. A row another admin is adopting or claiming right now is
/// left to it (`SKIP LOCKED`); if that write does not happen, the next sweep finds it again.
async fn adopt<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    condition: &str,
    node_id: &'q str,
    epoch: i64,
    own_epochs: &'static str,
    now_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let mut conn = db.write().await?;
    let gone =
        GoneOwner::new::<DB>(&mut conn, node_id, epoch, own_epochs, now_ms, Lapsed::Read).await?;
    let set = |sql: &mut Sql<'q, DB>| {
        sql.push_mut("owner_node = ");
        sql.bind_mut(node_id);
        sql.push_mut(", epoch = ");
        sql.bind_mut(epoch);
    };
    let filter = |sql: &mut Sql<'q, DB>| {
        sql.push_mut(condition);
        gone.push(sql);
    };
    let (_, rows) = update_logs::<DB>(
        &mut conn,
        &set,
        &filter,
        Lock::SkipLocked,
        Some(LOG_COLUMNS),
    )
    .await?;
    rows.iter().map(run_from_row::<DB>).collect()
}

/// Takes over PENDING runs of dead nodes and of this node's older epochs (through the partial
/// index of PENDING rows on SQLite, see `sqlite/plans.rs`).
pub async fn adopt_orphan_runs<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    now_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    adopt(db, "status = 'PENDING'", node_id, epoch, "<", now_ms).await
}

/// Takes over the PENDING runs of `dead_node` written by its epochs up to `dead_epoch`: a node
/// whose liveness lock (`store::liveness`) was seen held in that epoch and is free now, so its
/// process is gone although its lease has not lapsed yet. Fenced like every adoption (a fire
/// claimed meanwhile is no longer PENDING; one being claimed right now is left to its claimer by
/// `SKIP LOCKED`), so a live node judged dead by mistake (its lock connection dropped) only
/// loses those fires to this node: none is lost, none runs twice. A later epoch of the node
/// (it restarted) keeps its own rows.
pub async fn adopt_pending_of<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    dead: &'q NodeIdentity,
    node: &'q NodeIdentity,
) -> StoreResult<Vec<RunLog>> {
    let (dead_node, dead_epoch) = (dead.node_id.as_str(), dead.epoch);
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut conn = db.write().await?;
    let set = |sql: &mut Sql<'q, DB>| {
        sql.push_mut("owner_node = ");
        sql.bind_mut(node_id);
        sql.push_mut(", epoch = ");
        sql.bind_mut(epoch);
    };
    let filter = |sql: &mut Sql<'q, DB>| {
        sql.push_mut("status = 'PENDING' AND owner_node = ");
        sql.bind_mut(dead_node);
        sql.push_mut(" AND epoch <= ");
        sql.bind_mut(dead_epoch);
    };
    let (_, rows) = update_logs::<DB>(
        &mut conn,
        &set,
        &filter,
        Lock::SkipLocked,
        Some(LOG_COLUMNS),
    )
    .await?;
    rows.iter().map(run_from_row::<DB>).collect()
}

/// Takes over follow-up claims left unfinished: this node's own (any epoch up to the current
/// one) and those of dead nodes.
pub async fn adopt_stale_followups<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    now_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    adopt(db, "alarm_status = -1", node_id, epoch, "<=", now_ms).await
}

/// Takes over stranded runs among `ids` (RUNNING, no address, claimed by an admin that is gone)
/// that no executor holds, so this node sends them: the owner becomes this node/epoch and the
/// trigger time `now_ms`. Fenced like a claim: the condition is re-checked on the row, so of two
/// admins taking over the same run only the first changes it (the second no longer sees a gone
/// owner), and a result that landed meanwhile (status no longer RUNNING) wins. Owners are
/// judged gone by `lease_now_ms` (the database's clock, `database_now_ms`), on their rows
/// locked for the whole take-over (`Lapsed::Locked`): an owner that renews its
/// lease meanwhile either keeps its runs or finds them taken once its renewal is through.
pub async fn adopt_stranded<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[LogId],
    node: &'q NodeIdentity,
    now_ms: i64,
    lease_now_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let ids = raw_ids(ids);
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut tx = db.begin().await?;
    let conn: &mut DB::Connection = &mut tx;
    let gone = GoneOwner::new::<DB>(
        &mut *conn,
        node_id,
        epoch,
        "<",
        lease_now_ms,
        Lapsed::Locked,
    )
    .await?;
    let owner = |sql: &mut Sql<'q, DB>| gone.push(sql);
    let adopted = take_unsent::<DB>(&mut *conn, &ids, node, now_ms, &owner).await?;
    commit(tx).await?;
    Ok(adopted)
}

/// The owner condition of runs claimed by `dead` at its epoch or an earlier one.
fn push_owned_by<'q, DB: Dialect>(sql: &mut Sql<'q, DB>, dead: &'q NodeIdentity) {
    sql.push_mut(" AND owner_node = ");
    sql.bind_mut(dead.node_id.as_str());
    sql.push_mut(" AND epoch <= ");
    sql.bind_mut(dead.epoch);
}

/// The text of `claimed_unsent_of`'s read.
fn claimed_unsent_query<'q, DB: Dialect>(dead: &'q NodeIdentity, limit: i64) -> Sql<'q, DB> {
    let mut select = Sql::<DB>::new(format!(
        "SELECT {LOG_COLUMNS} FROM xjob_log WHERE status = 'RUNNING' AND executor_address = ''"
    ));
    push_owned_by(&mut select, dead);
    select.push_mut(" ORDER BY id LIMIT ");
    select.bind_mut(limit);
    select
}

/// RUNNING runs with no address claimed by `dead` (epochs up to its own), oldest first.
pub async fn claimed_unsent_of<DB: Dialect>(
    db: Pools<'_, DB>,
    dead: &NodeIdentity,
    limit: i64,
) -> StoreResult<Vec<RunLog>> {
    let mut conn = db.read().await?;
    let rows = claimed_unsent_query::<DB>(dead, limit)
        .fetch_all(&mut conn)
        .await?;
    rows.iter().map(run_from_row::<DB>).collect()
}

/// Takes over runs among `ids` that `dead` claimed and never sent, once the executors fenced
/// them against it: a conditional write (still RUNNING, no address, still `dead`'s), so of two
/// admins taking over the same run only the first changes it, a result that landed meanwhile
/// wins, and a run `dead` recorded as sent stays its.
pub async fn adopt_fenced<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[LogId],
    dead: &'q NodeIdentity,
    node: &'q NodeIdentity,
    now_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let ids = raw_ids(ids);
    let mut conn = db.write().await?;
    let owner = |sql: &mut Sql<'q, DB>| push_owned_by(sql, dead);
    take_unsent::<DB>(&mut conn, &ids, node, now_ms, &owner).await
}

/// The update every take-over of unsent runs makes: of `ids`, the rows still RUNNING with no
/// address and owned as `owner` says (an SQL condition starting with ` AND`) become this
/// node/epoch's, with the trigger time `now_ms`; returns them.
async fn take_unsent<'q, DB: Dialect>(
    conn: &mut DB::Connection,
    ids: &[i64],
    node: &'q NodeIdentity,
    now_ms: i64,
    owner: &(dyn Fn(&mut Sql<'q, DB>) + Sync),
) -> StoreResult<Vec<RunLog>> {
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut taken = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let set = |sql: &mut Sql<'q, DB>| {
            sql.push_mut("owner_node = ");
            sql.bind_mut(node_id);
            sql.push_mut(", epoch = ");
            sql.bind_mut(epoch);
            sql.push_mut(", trigger_time_ms = ");
            sql.bind_mut(now_ms);
        };
        let filter = |sql: &mut Sql<'q, DB>| {
            sql.push_mut("id");
            DB::push_id_list(sql, chunk);
            sql.push_mut(&format!(
                " AND {} = 'RUNNING' AND executor_address = ''",
                unindexed::<DB>("status")
            ));
            owner(sql);
        };
        let (_, rows) =
            update_logs::<DB>(&mut *conn, &set, &filter, Lock::Wait, Some(LOG_COLUMNS)).await?;
        for row in &rows {
            taken.push(run_from_row::<DB>(row)?);
        }
    }
    Ok(taken)
}

/// Marks stranded runs this node took over (`adopt_stranded`) and will not send as SKIPPED
/// with a reason (a misfire, or a job that is gone); only rows still RUNNING, unsent and owned
/// by this node/epoch change.
pub async fn skip_adopted_stranded<'q, DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[LogId],
    node: &'q NodeIdentity,
    reason: &'q str,
    now_ms: i64,
) -> StoreResult<u64> {
    let ids = raw_ids(ids);
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut conn = db.write().await?;
    let mut skipped = 0;
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let set = |sql: &mut Sql<'q, DB>| {
            sql.push_mut("status = 'SKIPPED', trigger_msg = ");
            sql.bind_mut(reason);
            sql.push_mut(", trigger_time_ms = ");
            sql.bind_mut(now_ms);
        };
        let filter = |sql: &mut Sql<'q, DB>| {
            sql.push_mut("id");
            DB::push_id_list(sql, chunk);
            sql.push_mut(&format!(
                " AND {} = 'RUNNING' AND executor_address = '' AND owner_node = ",
                unindexed::<DB>("status")
            ));
            sql.bind_mut(node_id);
            sql.push_mut(" AND epoch = ");
            sql.bind_mut(epoch);
        };
        skipped += update_logs::<DB>(&mut conn, &set, &filter, Lock::Wait, None)
            .await?
            .0;
    }
    Ok(skipped)
}

/// RUNNING runs whose dispatch was never recorded (no address) by an admin that is gone: any of
/// this node's earlier epochs, and other nodes' claimed before the instant `gone` carries.
pub fn stranded_dispatches_query<'q, DB: Dialect>(gone: &GoneOwnerArgs<'q>) -> Sql<'q, DB> {
    let mut select = Sql::<DB>::new(format!(
        "SELECT {LOG_COLUMNS} FROM xjob_log WHERE status = 'RUNNING' AND executor_address = ''"
    ));
    gone.0.push(&mut select);
    select.push(" ORDER BY id LIMIT 10000")
}

/// The gone-owner condition of `stranded_dispatches_query`, built by `stranded_dispatches`.
pub struct GoneOwnerArgs<'q>(GoneOwner<'q>);

pub async fn stranded_dispatches<DB: Dialect>(
    db: Pools<'_, DB>,
    node: &NodeIdentity,
    now_ms: i64,
    claimed_before_ms: i64,
) -> StoreResult<Vec<RunLog>> {
    let (node_id, epoch) = (node.node_id.as_str(), node.epoch);
    let mut conn = db.read().await?;
    let mut gone =
        GoneOwner::new::<DB>(&mut conn, node_id, epoch, "<", now_ms, Lapsed::Read).await?;
    gone.others_claimed_before_ms = Some(claimed_before_ms);
    let rows = stranded_dispatches_query::<DB>(&GoneOwnerArgs(gone))
        .fetch_all(&mut conn)
        .await?;
    rows.iter().map(run_from_row::<DB>).collect()
}

/// The SQLite texts of the adoption statements, the stranded-dispatch read and the read of a
/// fenced owner's claimed runs, for its plan test.
#[cfg(test)]
pub fn sqlite_texts_for_plans() -> [String; 4] {
    use sqlx::Sqlite;
    let gone = |own_epochs| GoneOwner {
        node_id: "n1",
        epoch: 1,
        own_epochs,
        now_ms: 0,
        listed: None,
        others_claimed_before_ms: None,
    };
    let adoption = |condition: &str, own_epochs| {
        let mut update = Sql::<Sqlite>::new("UPDATE xjob_log SET owner_node = ");
        update.bind_mut("n1");
        update.push_mut(", epoch = ");
        update.bind_mut(1_i64);
        update.push_mut(" WHERE ");
        update.push_mut(condition);
        gone(own_epochs).push(&mut update);
        update
            .push(" RETURNING ")
            .push(LOG_COLUMNS)
            .text()
            .to_string()
    };
    let stranded = stranded_dispatches_query::<Sqlite>(&GoneOwnerArgs(GoneOwner {
        others_claimed_before_ms: Some(0),
        ..gone("<")
    }))
    .text()
    .to_string();
    let dead = NodeIdentity::new("n2", 1);
    let claimed_unsent = claimed_unsent_query::<Sqlite>(&dead, 10).text().to_string();
    [
        adoption("status = 'PENDING'", "<"),
        adoption("alarm_status = -1", "<="),
        stranded,
        claimed_unsent,
    ]
}

#[cfg(test)]
#[path = "adoption_race_tests.rs"]
mod race_tests;
