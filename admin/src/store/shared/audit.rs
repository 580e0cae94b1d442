//! The audit trail of changes made through JobAdmin.

use crate::model::AuditEntry;
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql};

/// Appends one entry (its `id` is assigned by the database).
pub async fn insert_audit<DB: Dialect>(db: Pools<'_, DB>, entry: &AuditEntry) -> StoreResult<()> {
    Sql::<DB>::new("INSERT INTO xjob_audit (at_ms, actor, call_name, object, summary) VALUES (")
        .bind(entry.at_ms)
        .push(", ")
        .bind(entry.actor.as_str())
        .push(", ")
        .bind(entry.call.as_str())
        .push(", ")
        .bind(entry.object.as_str())
        .push(", ")
        .bind(entry.summary.as_str())
        .push(")")
        .execute(&mut *db.write().await?)
        .await?;
    Ok(())
}

/// A page of entries, newest first.
pub async fn list_audit<DB: Dialect>(
    db: Pools<'_, DB>,
    offset: i64,
    limit: i64,
) -> StoreResult<Vec<AuditEntry>> {
    let rows = Sql::<DB>::new(
        "SELECT id, at_ms, actor, call_name, object, summary FROM xjob_audit ORDER BY id DESC \
         LIMIT ",
    )
    .bind(limit)
    .push(" OFFSET ")
    .bind(offset)
    .fetch_all(&mut *db.read().await?)
    .await?;
    rows.iter()
        .map(|row| {
            let row = Cols::<DB>(row);
            Ok(AuditEntry {
                id: row.get("id")?,
                at_ms: row.get("at_ms")?,
                actor: row.get("actor")?,
                call: row.get("call_name")?,
                object: row.get("object")?,
                summary: row.get("summary")?,
            })
        })
        .collect()
}

/// Deletes entries older than `before_ms`, at most `limit` of them; returns how many.
pub async fn prune_audit<DB: Dialect>(
    db: Pools<'_, DB>,
    before_ms: i64,
    limit: i64,
) -> StoreResult<u64> {
    let sql = if DB::DELETE_TAKES_LIMIT {
        Sql::<DB>::new("DELETE FROM xjob_audit WHERE at_ms < ")
            .bind(before_ms)
            .push(" ORDER BY id LIMIT ")
            .bind(limit)
    } else {
        Sql::<DB>::new(
            "DELETE FROM xjob_audit WHERE id IN (SELECT id FROM xjob_audit WHERE at_ms < ",
        )
        .bind(before_ms)
        .push(" ORDER BY id LIMIT ")
        .bind(limit)
        .push(")")
    };
    sql.affected(&mut *db.write().await?).await
}
