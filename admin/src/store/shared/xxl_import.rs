//! What `xjob import-xxl-job` imported (`xjob_xxl_import`): the record that makes a second
//! import of the same XXL-JOB database create nothing new.

use crate::model::{Job, JobId};
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql, commit};
use crate::store::{StoreResult, XxlJobImport};

/// `(XXL-JOB job id, xjob job id)` of every job imported from `source`, by XXL-JOB id.
pub async fn xxl_imported_jobs<DB: Dialect>(
    db: Pools<'_, DB>,
    source: &str,
) -> StoreResult<Vec<(i64, JobId)>> {
    let rows = Sql::<DB>::new("SELECT xxl_job_id, job_id FROM xjob_xxl_import WHERE source = ")
        .bind(source)
        .push(" ORDER BY xxl_job_id")
        .fetch_all(&mut *db.read().await?)
        .await?;
    rows.iter()
        .map(|row| {
            let row = Cols::<DB>(row);
            Ok((row.get("xxl_job_id")?, row.get("job_id")?))
        })
        .collect()
}

/// Inserts an imported job, its glue versions (oldest first, so ids keep their order) and its
/// import record in one transaction: a crash leaves either all of it or nothing. A record left
/// by a job deleted since (`replaces`) is dropped first; any other record for the same XXL-JOB
/// job (a concurrent import) makes the insert a `Conflict` and nothing is written.
pub async fn import_xxl_job<DB: Dialect>(
    db: Pools<'_, DB>,
    import: &XxlJobImport,
) -> StoreResult<Job> {
    let mut tx = db.begin().await?;
    if let Some(stale_job_id) = import.replaces {
        Sql::<DB>::new("DELETE FROM xjob_xxl_import WHERE source = ")
            .bind(import.source.as_str())
            .push(" AND xxl_job_id = ")
            .bind(import.xxl_job_id)
            .push(" AND job_id = ")
            .bind(stale_job_id.0)
            .execute(&mut tx)
            .await?;
    }
    let job = super::jobs::insert_job_on::<DB>(&mut tx, &import.job).await?;
    Sql::<DB>::new(
        "INSERT INTO xjob_xxl_import (source, xxl_job_id, job_id, imported_ms) VALUES (",
    )
    .bind(import.source.as_str())
    .push(", ")
    .bind(import.xxl_job_id)
    .push(", ")
    .bind(job.id.0)
    .push(", ")
    .bind(import.now_ms)
    .push(")")
    .execute(&mut tx)
    .await?;
    for version in &import.glue_versions {
        Sql::<DB>::new(
            "INSERT INTO xjob_glue (job_id, glue_type, glue_source, glue_remark, created_ms) \
             VALUES (",
        )
        .bind(job.id.0)
        .push(", ")
        .bind(version.glue_type.as_str())
        .push(", ")
        .bind(version.glue_source.as_str())
        .push(", ")
        .bind(version.glue_remark.as_str())
        .push(", ")
        .bind(version.created_ms)
        .push(")")
        .execute(&mut tx)
        .await?;
    }
    commit(tx).await?;
    Ok(job)
}
