//! Saved versions of script jobs' glue source (`xjob_glue`): one row per save, the latest
//! [`GLUE_VERSIONS_KEPT`] per job kept.

use super::{PgStore, map_error};
use crate::model::glue::GLUE_VERSIONS_KEPT;
use crate::model::{GlueEdit, GlueType, GlueVersion};
use crate::store::{StoreError, StoreResult};

type VersionRow = (i64, i64, String, String, String, i64);

const VERSION_COLUMNS: &str = "id, job_id, glue_type, glue_source, glue_remark, created_ms";

fn version_from_row(row: VersionRow) -> StoreResult<GlueVersion> {
    let (id, job_id, glue_type, glue_source, glue_remark, created_ms) = row;
    let glue_type = GlueType::parse(&glue_type).ok_or_else(|| {
        StoreError::Corrupt(format!("xjob_glue {id}: unknown glue_type '{glue_type}'"))
    })?;
    Ok(GlueVersion {
        id,
        job_id,
        glue_type,
        glue_source,
        glue_remark,
        created_ms,
    })
}

impl PgStore {
    /// Sets a job's glue source and remark (stamping `glue_updated_ms`), saves them as a version
    /// (on the job's first edit, the replaced source too) and deletes the job's versions beyond
    /// the latest kept, in one transaction; false when the job does not exist.
    pub async fn save_glue(&self, edit: &GlueEdit) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await.map_err(map_error)?;
        // The first edit also keeps the source it replaces (the one the job was created with),
        // so it can be read back and restored like any later version.
        let history: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM xjob_glue WHERE job_id = $1")
            .bind(edit.job_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(map_error)?;
        if history == 0 {
            sqlx::query(
                "INSERT INTO xjob_glue (job_id, glue_type, glue_source, glue_remark, created_ms) \
                 SELECT id, glue_type, glue_source, glue_remark, glue_updated_ms FROM xjob_job \
                 WHERE id = $1 AND glue_source <> ''",
            )
            .bind(edit.job_id)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        }
        let updated = sqlx::query(
            "UPDATE xjob_job SET glue_source = $1, glue_remark = $2, glue_updated_ms = $3, \
             updated_ms = $3 WHERE id = $4",
        )
        .bind(&edit.glue_source)
        .bind(&edit.glue_remark)
        .bind(edit.now_ms)
        .bind(edit.job_id)
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
        if updated.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO xjob_glue (job_id, glue_type, glue_source, glue_remark, created_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(edit.job_id)
        .bind(edit.glue_type.as_str())
        .bind(&edit.glue_source)
        .bind(&edit.glue_remark)
        .bind(edit.now_ms)
        .execute(&mut *tx)
        .await
        .map_err(map_error)?;
        // The oldest id kept; MySQL allows no LIMIT inside IN, so this takes two statements.
        let oldest_kept: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM xjob_glue WHERE job_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2",
        )
        .bind(edit.job_id)
        .bind(GLUE_VERSIONS_KEPT - 1)
        .fetch_optional(&mut *tx)
        .await
        .map_err(map_error)?;
        if let Some(oldest_kept) = oldest_kept {
            sqlx::query("DELETE FROM xjob_glue WHERE job_id = $1 AND id < $2")
                .bind(edit.job_id)
                .bind(oldest_kept)
                .execute(&mut *tx)
                .await
                .map_err(map_error)?;
        }
        tx.commit().await.map_err(map_error)?;
        Ok(true)
    }

    /// A job's saved glue versions, newest first.
    pub async fn list_glue_versions(&self, job_id: i64) -> StoreResult<Vec<GlueVersion>> {
        let rows: Vec<VersionRow> = sqlx::query_as(&format!(
            "SELECT {VERSION_COLUMNS} FROM xjob_glue WHERE job_id = $1 ORDER BY id DESC"
        ))
        .bind(job_id)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)?;
        rows.into_iter().map(version_from_row).collect()
    }

    /// One saved glue version by id.
    pub async fn get_glue_version(&self, id: i64) -> StoreResult<Option<GlueVersion>> {
        let row: Option<VersionRow> = sqlx::query_as(&format!(
            "SELECT {VERSION_COLUMNS} FROM xjob_glue WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(map_error)?;
        row.map(version_from_row).transpose()
    }
}
