//! Every store statement, written once over `DB: Dialect` (see `dialect.rs`). Each function
//! takes the backend's `Pools` and is what a `Store` method runs.

pub mod adoption;
pub mod audit;
pub mod auth;
pub mod backfills;
pub mod broadcast;
pub mod calendars;
pub mod claims;
pub mod console;
pub mod followups;
pub mod glue;
pub mod groups;
pub mod inserts;
pub mod jobs;
pub mod logs;
pub mod monitor;
pub mod overlap;
pub mod partitions;
pub mod registry;
pub mod report;
pub mod rows;
pub mod schedule;
pub mod workflow_runs;
pub mod workflow_schedule;
pub mod workflows;
pub mod xxl_import;

use super::dialect::Dialect;
use super::error::StoreResult;
use super::sql::Sql;

/// Runs a one-row `INSERT …` and returns the new row's id: through `RETURNING id` where the
/// dialect has it, else the statement's insert id (MySQL).
pub async fn insert_returning_id<DB: Dialect>(
    conn: &mut DB::Connection,
    insert: Sql<'_, DB>,
) -> StoreResult<i64> {
    if DB::INSERT_RETURNING {
        insert.push(" RETURNING id").fetch_scalar(conn).await
    } else {
        insert.execute(conn).await?.last_insert_id.ok_or_else(|| {
            super::StoreError::Corrupt("the insert returned no auto-increment id".to_string())
        })
    }
}

/// ` ORDER BY column [DESC], id [DESC]`: the id breaks ties, so the pages of a sorted list
/// neither repeat nor skip rows. `column` comes from a store's own list of sortable columns,
/// never from a request. `None` = by id, ascending.
pub fn push_order<DB: Dialect>(query: &mut Sql<'_, DB>, order: Option<(&'static str, bool)>) {
    let (column, descending) = order.unwrap_or(("id", false));
    let direction = if descending { " DESC" } else { "" };
    if column == "id" {
        query.push_mut(&format!(" ORDER BY id{direction}"));
    } else {
        query.push_mut(&format!(" ORDER BY {column}{direction}, id{direction}"));
    }
}

/// The plain `i64`s of typed ids, for binds.
pub fn raw_ids<T: Copy + Into<i64>>(ids: &[T]) -> Vec<i64> {
    ids.iter().map(|&id| id.into()).collect()
}

/// `raw_ids` sorted and without repeats (batch reads ask for each row once).
pub fn distinct_raw_ids<T: Copy + Into<i64>>(ids: &[T]) -> Vec<i64> {
    let mut ids = raw_ids(ids);
    ids.sort_unstable();
    ids.dedup();
    ids
}
