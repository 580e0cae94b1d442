//! The schedule round under the lock, node leases, and the claim/adopt steps that make every
//! scheduled fire run exactly once.
//!
//! The round is one transaction that first locks the `schedule_lock` row
//! (`SELECT … FOR UPDATE`), so of several admins exactly one plans at a time; the planning
//! closure is pure, so no network I/O happens while the lock is held. Claims and adoptions lock
//! their candidate rows in id order, update exactly those, and read them back.

use sqlx::{MySql, MySqlConnection, QueryBuilder};

use super::rows::{LOG_COLUMNS, get, run_from_row};
use super::{MAX_BIND_PARAMS, MySqlStore, map_error, placeholders};
use crate::model::RunLog;
use crate::store::StoreResult;

impl MySqlStore {
    pub async fn adopt_orphan_runs(
        &self,
        node_id: &str,
        epoch: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<RunLog>> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        let gone = gone_nodes(&mut tx, node_id, now_ms).await?;
        let mut select = QueryBuilder::new("SELECT id FROM xjob_log WHERE status = 'PENDING'");
        push_gone_owner(&mut select, node_id, epoch, "<", &gone);
        let ids = lock_ids(&mut tx, select).await?;
        for chunk in ids.chunks(MAX_BIND_PARAMS) {
            let sql = format!(
                "UPDATE xjob_log SET owner_node = ?, epoch = ? WHERE id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query(&sql).bind(node_id).bind(epoch);
            for id in chunk {
                query = query.bind(id);
            }
            query.execute(&mut *tx).await.map_err(map_error)?;
        }
        let adopted = runs_by_id(&mut tx, &ids).await?;
        tx.commit().await.map_err(map_error)?;
        Ok(adopted)
    }
}

/// Nodes other than `node_id` whose lease lapsed before `now_ms`.
pub(super) async fn gone_nodes(
    conn: &mut MySqlConnection,
    node_id: &str,
    now_ms: i64,
) -> StoreResult<Vec<String>> {
    let rows =
        sqlx::query("SELECT node_id FROM xjob_node WHERE lease_until_ms < ? AND node_id <> ?")
            .bind(now_ms)
            .bind(node_id)
            .fetch_all(&mut *conn)
            .await
            .map_err(map_error)?;
    rows.iter().map(|row| get(row, "node_id")).collect()
}

/// Pushes ` AND (…)` keeping rows owned by a gone admin: an earlier epoch of this node
/// (`own_epochs` is `<`, or `<=` to include the current one) or any epoch of a `gone` node.
pub(super) fn push_gone_owner(
    query: &mut QueryBuilder<'_, MySql>,
    node_id: &str,
    epoch: i64,
    own_epochs: &str,
    gone: &[String],
) {
    query
        .push(" AND ((owner_node = ")
        .push_bind(node_id.to_string());
    query
        .push(format!(" AND epoch {own_epochs} "))
        .push_bind(epoch)
        .push(")");
    if !gone.is_empty() {
        query.push(" OR owner_node IN (");
        let mut names = query.separated(", ");
        for name in gone {
            names.push_bind(name.clone());
        }
        query.push(")");
    }
    query.push(")");
}

/// Runs a `SELECT id …` as a locking read in id order; returns the locked ids.
pub(super) async fn lock_ids(
    conn: &mut MySqlConnection,
    mut select: QueryBuilder<'_, MySql>,
) -> StoreResult<Vec<i64>> {
    select.push(" ORDER BY id FOR UPDATE");
    select
        .build_query_scalar::<i64>()
        .fetch_all(&mut *conn)
        .await
        .map_err(map_error)
}

/// The runs with the given ids, by id.
pub(super) async fn runs_by_id(
    conn: &mut MySqlConnection,
    ids: &[i64],
) -> StoreResult<Vec<RunLog>> {
    let mut runs = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(MAX_BIND_PARAMS) {
        let sql = format!(
            "SELECT {LOG_COLUMNS} FROM xjob_log WHERE id IN ({}) ORDER BY id",
            placeholders(chunk.len())
        );
        let mut query = sqlx::query(&sql);
        for id in chunk {
            query = query.bind(id);
        }
        for row in query.fetch_all(&mut *conn).await.map_err(map_error)? {
            runs.push(run_from_row(&row)?);
        }
    }
    runs.sort_by_key(|run| run.id);
    Ok(runs)
}
