//! Executor groups.

use super::rows::group_from_row;
use super::{SqliteStore, map_error};
use crate::model::Group;
use crate::store::StoreResult;

const GROUP_COLUMNS: &str =
    "id, app_name, title, address_type, addresses, access_token, updated_ms";

impl SqliteStore {
    pub async fn insert_group(&self, group: &Group) -> StoreResult<Group> {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO xjob_group (app_name, title, address_type, addresses, access_token, \
             updated_ms) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(&group.app_name)
        .bind(&group.title)
        .bind(group.address_type.as_str())
        .bind(group.addresses.join(","))
        .bind(&group.access_token)
        .bind(group.updated_ms)
        .fetch_one(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(Group {
            id,
            ..group.clone()
        })
    }

    pub async fn update_group(&self, group: &Group) -> StoreResult<bool> {
        let result = sqlx::query(
            "UPDATE xjob_group SET title = ?, address_type = ?, addresses = ?, access_token = ?, \
             updated_ms = ? WHERE id = ?",
        )
        .bind(&group.title)
        .bind(group.address_type.as_str())
        .bind(group.addresses.join(","))
        .bind(&group.access_token)
        .bind(group.updated_ms)
        .bind(group.id)
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn delete_group(&self, id: i64) -> StoreResult<bool> {
        let result = sqlx::query("DELETE FROM xjob_group WHERE id = ?")
            .bind(id)
            .execute(&self.writer)
            .await
            .map_err(map_error)?;
        Ok(result.rows_affected() == 1)
    }

    pub async fn get_group(&self, id: i64) -> StoreResult<Option<Group>> {
        let row = sqlx::query(&format!(
            "SELECT {GROUP_COLUMNS} FROM xjob_group WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.reader)
        .await
        .map_err(map_error)?;
        row.as_ref().map(group_from_row).transpose()
    }

    pub async fn get_group_by_app(&self, app_name: &str) -> StoreResult<Option<Group>> {
        let row = sqlx::query(&format!(
            "SELECT {GROUP_COLUMNS} FROM xjob_group WHERE app_name = ?"
        ))
        .bind(app_name)
        .fetch_optional(&self.reader)
        .await
        .map_err(map_error)?;
        row.as_ref().map(group_from_row).transpose()
    }

    pub async fn list_groups(
        &self,
        app_name_filter: &str,
        offset: i64,
        limit: i64,
    ) -> StoreResult<Vec<Group>> {
        let rows = sqlx::query(&format!(
            "SELECT {GROUP_COLUMNS} FROM xjob_group WHERE instr(app_name, ?) > 0 \
             ORDER BY id LIMIT ? OFFSET ?"
        ))
        .bind(app_name_filter)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.reader)
        .await
        .map_err(map_error)?;
        rows.iter().map(group_from_row).collect()
    }

    pub async fn count_jobs_in_group(&self, group_id: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM xjob_job WHERE group_id = ?")
            .bind(group_id)
            .fetch_one(&self.reader)
            .await
            .map_err(map_error)
    }
}
