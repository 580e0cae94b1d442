//! Saved versions of script jobs' glue source (`xjob_glue`): one row per save, the latest
//! [`GLUE_VERSIONS_KEPT`] per job kept.

use crate::model::glue::GLUE_VERSIONS_KEPT;
use crate::model::{GlueEdit, GlueType, GlueVersion, JobId};
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql, commit};

const SELECT_VERSION: &str =
    "SELECT id, job_id, glue_type, glue_source, glue_remark, created_ms FROM xjob_glue";

fn version_from_row<DB: Dialect>(row: &DB::Row) -> StoreResult<GlueVersion> {
    let row = Cols::<DB>(row);
    Ok(GlueVersion {
        id: row.get("id")?,
        job_id: row.get("job_id")?,
        glue_type: row.parse("glue_type", GlueType::parse)?,
        glue_source: row.get("glue_source")?,
        glue_remark: row.get("glue_remark")?,
        created_ms: row.get("created_ms")?,
    })
}

/// Sets a job's glue source and remark (stamping `glue_updated_ms`), saves them as a version
/// (on the job's first edit, the replaced source too) and deletes the job's versions beyond the
/// latest kept, in one transaction; false when the job does not exist.
pub async fn save_glue<DB: Dialect>(db: Pools<'_, DB>, edit: &GlueEdit) -> StoreResult<bool> {
    let mut tx = db.begin().await?;
    // The first edit also keeps the source it replaces (the one the job was created with), so
    // it can be read back and restored like any later version.
    let history: i64 = Sql::<DB>::new("SELECT COUNT(*) FROM xjob_glue WHERE job_id = ")
        .bind(edit.job_id.0)
        .fetch_scalar(&mut tx)
        .await?;
    if history == 0 {
        Sql::<DB>::new(
            "INSERT INTO xjob_glue (job_id, glue_type, glue_source, glue_remark, created_ms) \
             SELECT id, glue_type, glue_source, glue_remark, glue_updated_ms FROM xjob_job \
             WHERE glue_source <> '' AND id = ",
        )
        .bind(edit.job_id.0)
        .execute(&mut tx)
        .await?;
    }
    let updated = Sql::<DB>::new("UPDATE xjob_job SET glue_source = ")
        .bind(edit.glue_source.as_str())
        .push(", glue_remark = ")
        .bind(edit.glue_remark.as_str())
        .push(", glue_updated_ms = ")
        .bind(edit.now_ms)
        .push(", updated_ms = ")
        .bind(edit.now_ms)
        .push(" WHERE id = ")
        .bind(edit.job_id.0)
        .affected(&mut tx)
        .await?;
    if updated == 0 {
        return Ok(false);
    }
    Sql::<DB>::new(
        "INSERT INTO xjob_glue (job_id, glue_type, glue_source, glue_remark, created_ms) VALUES (",
    )
    .bind(edit.job_id.0)
    .push(", ")
    .bind(edit.glue_type.as_str())
    .push(", ")
    .bind(edit.glue_source.as_str())
    .push(", ")
    .bind(edit.glue_remark.as_str())
    .push(", ")
    .bind(edit.now_ms)
    .push(")")
    .execute(&mut tx)
    .await?;
    // The oldest id kept; MySQL allows no LIMIT inside IN, so this takes two statements.
    let oldest_kept: Vec<i64> = Sql::<DB>::new("SELECT id FROM xjob_glue WHERE job_id = ")
        .bind(edit.job_id.0)
        .push(" ORDER BY id DESC LIMIT 1 OFFSET ")
        .bind(GLUE_VERSIONS_KEPT - 1)
        .fetch_column(&mut tx)
        .await?;
    if let Some(oldest_kept) = oldest_kept.first() {
        Sql::<DB>::new("DELETE FROM xjob_glue WHERE job_id = ")
            .bind(edit.job_id.0)
            .push(" AND id < ")
            .bind(*oldest_kept)
            .execute(&mut tx)
            .await?;
    }
    commit(tx).await?;
    Ok(true)
}

/// A job's saved glue versions, newest first.
pub async fn list_glue_versions<DB: Dialect>(
    db: Pools<'_, DB>,
    job_id: JobId,
) -> StoreResult<Vec<GlueVersion>> {
    let rows = Sql::<DB>::new(SELECT_VERSION)
        .push(" WHERE job_id = ")
        .bind(job_id.0)
        .push(" ORDER BY id DESC")
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter().map(version_from_row::<DB>).collect()
}

/// One saved glue version by id.
pub async fn get_glue_version<DB: Dialect>(
    db: Pools<'_, DB>,
    id: i64,
) -> StoreResult<Option<GlueVersion>> {
    let row = Sql::<DB>::new(SELECT_VERSION)
        .push(" WHERE id = ")
        .bind(id)
        .fetch_optional(&mut *db.read().await?)
        .await?;
    row.as_ref().map(version_from_row::<DB>).transpose()
}
