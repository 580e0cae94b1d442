//! Executor groups.

use std::collections::HashMap;
use std::sync::Arc;

use super::rows::group_from_row;
use crate::model::{Group, GroupId};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql};

const SELECT_GROUP: &str =
    "SELECT id, app_name, title, address_type, addresses, access_token, updated_ms FROM xjob_group";

pub async fn insert_group<DB: Dialect>(db: Pools<'_, DB>, group: &Group) -> StoreResult<Group> {
    let insert = Sql::<DB>::new(
        "INSERT INTO xjob_group (app_name, title, address_type, addresses, access_token, \
         updated_ms) VALUES (",
    )
    .bind(group.app_name.as_str())
    .push(", ")
    .bind(group.title.as_str())
    .push(", ")
    .bind(group.address_type.as_str())
    .push(", ")
    .bind(group.addresses.join(","))
    .push(", ")
    .bind(group.access_token.as_str())
    .push(", ")
    .bind(group.updated_ms)
    .push(")");
    let id = GroupId(super::insert_returning_id(&mut *db.write().await?, insert).await?);
    Ok(Group {
        id,
        ..group.clone()
    })
}

pub async fn update_group<DB: Dialect>(db: Pools<'_, DB>, group: &Group) -> StoreResult<bool> {
    // On MySQL rows_affected counts matched rows (the driver sets CLIENT_FOUND_ROWS), so an
    // update that changes nothing still reports the group as found.
    let updated = Sql::<DB>::new("UPDATE xjob_group SET title = ")
        .bind(group.title.as_str())
        .push(", address_type = ")
        .bind(group.address_type.as_str())
        .push(", addresses = ")
        .bind(group.addresses.join(","))
        .push(", access_token = ")
        .bind(group.access_token.as_str())
        .push(", updated_ms = ")
        .bind(group.updated_ms)
        .push(" WHERE id = ")
        .bind(group.id.0)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(updated == 1)
}

pub async fn delete_group<DB: Dialect>(db: Pools<'_, DB>, id: GroupId) -> StoreResult<bool> {
    let deleted = Sql::<DB>::new("DELETE FROM xjob_group WHERE id = ")
        .bind(id.0)
        .affected(&mut *db.write().await?)
        .await?;
    Ok(deleted == 1)
}

pub async fn get_group<DB: Dialect>(db: Pools<'_, DB>, id: GroupId) -> StoreResult<Option<Group>> {
    let row = Sql::<DB>::new(SELECT_GROUP)
        .push(" WHERE id = ")
        .bind(id.0)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(group_from_row::<DB>).transpose()
}

/// The groups of `ids` that exist, by id (one statement per chunk of distinct ids; no ids, no
/// statement).
pub async fn get_groups<DB: Dialect>(
    db: Pools<'_, DB>,
    ids: &[GroupId],
) -> StoreResult<HashMap<GroupId, Arc<Group>>> {
    let ids = super::distinct_raw_ids(ids);
    let mut groups = HashMap::with_capacity(ids.len());
    if ids.is_empty() {
        return Ok(groups);
    }
    let mut conn = db.read().await?;
    for chunk in ids.chunks(DB::IDS_PER_STATEMENT) {
        let mut select = Sql::<DB>::new(format!("{SELECT_GROUP} WHERE id"));
        DB::push_id_list(&mut select, chunk);
        for row in &select.fetch_all(&mut conn).await? {
            let group = group_from_row::<DB>(row)?;
            groups.insert(group.id, Arc::new(group));
        }
    }
    Ok(groups)
}

pub async fn get_group_by_app<DB: Dialect>(
    db: Pools<'_, DB>,
    app_name: &str,
) -> StoreResult<Option<Group>> {
    let row = Sql::<DB>::new(SELECT_GROUP)
        .push(" WHERE app_name = ")
        .bind(app_name)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(group_from_row::<DB>).transpose()
}

pub async fn list_groups<DB: Dialect>(
    db: Pools<'_, DB>,
    app_name_filter: &str,
    offset: i64,
    limit: i64,
) -> StoreResult<Vec<Group>> {
    let rows = Sql::<DB>::new(SELECT_GROUP)
        .push(" WHERE ")
        .push(DB::POSITION_FN)
        .push("(app_name, ")
        .bind(app_name_filter)
        .push(") > 0 ORDER BY id LIMIT ")
        .bind(limit)
        .push(" OFFSET ")
        .bind(offset)
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(group_from_row::<DB>).collect()
}

pub async fn group_app_names<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<Vec<String>> {
    let rows = Sql::<DB>::new("SELECT app_name FROM xjob_group ORDER BY app_name")
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter()
        .map(|row| Cols::<DB>(row).get::<String>("app_name"))
        .collect()
}

/// Every distinct group access token that is set (a callback with a log id that names no run
/// is acknowledged only to a caller holding one of them).
pub async fn group_access_tokens<DB: Dialect>(db: Pools<'_, DB>) -> StoreResult<Vec<String>> {
    let rows = Sql::<DB>::new(
        "SELECT DISTINCT access_token FROM xjob_group WHERE access_token <> '' \
         ORDER BY access_token",
    )
    .fetch_all(&mut *db.read().await?)
    .await?;
    rows.iter()
        .map(|row| Cols::<DB>(row).get::<String>("access_token"))
        .collect()
}

pub async fn count_jobs_in_group<DB: Dialect>(
    db: Pools<'_, DB>,
    group_id: GroupId,
) -> StoreResult<i64> {
    Sql::<DB>::new("SELECT COUNT(*) FROM xjob_job WHERE group_id = ")
        .bind(group_id.0)
        .fetch_scalar(&mut *db.read().await?)
        .await
}
