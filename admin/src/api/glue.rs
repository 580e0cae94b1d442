//! The glue calls of `JobAdmin`: edit a script job's source with a remark (saved as a version,
//! the latest 30 kept) and read its versions. `job_admin` forwards the three RPCs here.
//!
//! An edit stamps the job's `glue_updated_ms` with the save time; executors name their cached
//! script file by that stamp, so the next run writes and runs the new source.

use xjob_proto::pb;

use super::convert::{glue_type_to_pb, job_to_pb};
use crate::error::Error;
use crate::model::line_ends::to_lf;
use crate::model::{GlueEdit, GlueType, GlueVersion, JobId, now_ms};
use crate::store::Store;

/// Longest glue source accepted, in bytes (MySQL's MEDIUMTEXT holds 16 MiB; a script this big
/// is a mistake).
pub const MAX_GLUE_SOURCE_BYTES: usize = 1024 * 1024;

/// `UpdateGlue`: validates, saves the source (line ends made LF) as the job's current one and
/// as a version.
pub async fn update_glue(
    store: &Store,
    request: pb::UpdateGlueRequest,
) -> Result<pb::UpdateGlueResponse, Error> {
    if request.glue_source.trim().is_empty() {
        return Err(Error::invalid("glue_source", "required"));
    }
    if request.glue_source.len() > MAX_GLUE_SOURCE_BYTES {
        return Err(Error::invalid(
            "glue_source",
            format!("longer than {MAX_GLUE_SOURCE_BYTES} bytes"),
        ));
    }
    let remark = request.glue_remark.trim();
    if remark.is_empty() {
        return Err(Error::invalid("glue_remark", "required (what changed)"));
    }
    let job = load_job(store, JobId(request.job_id)).await?;
    if job.glue_type == GlueType::Bean {
        return Err(Error::FailedPrecondition(format!(
            "job {} is a BEAN job: it runs a named handler and has no glue source",
            job.id
        )));
    }
    let edit = GlueEdit {
        job_id: job.id,
        glue_type: job.glue_type,
        glue_source: to_lf(&request.glue_source),
        glue_remark: remark.to_owned(),
        now_ms: now_ms(),
    };
    if !store.save_glue(&edit).await? {
        return Err(job_not_found(job.id));
    }
    let saved = load_job(store, job.id).await?;
    Ok(pb::UpdateGlueResponse {
        job: Some(job_to_pb(saved)),
    })
}

/// `ListGlueVersions`: the job's versions, newest first, without their source.
pub async fn list_glue_versions(
    store: &Store,
    request: pb::ListGlueVersionsRequest,
) -> Result<pb::ListGlueVersionsResponse, Error> {
    let job_id = JobId(request.job_id);
    load_job(store, job_id).await?;
    let versions = store.list_glue_versions(job_id).await?;
    Ok(pb::ListGlueVersionsResponse {
        versions: versions
            .into_iter()
            .map(|version| GlueVersion {
                glue_source: String::new(),
                ..version
            })
            .map(version_to_pb)
            .collect(),
    })
}

/// `GetGlueVersion`: one version with its source.
pub async fn get_glue_version(
    store: &Store,
    request: pb::GetGlueVersionRequest,
) -> Result<pb::GetGlueVersionResponse, Error> {
    let version = store
        .get_glue_version(request.id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("glue version {} not found", request.id)))?;
    Ok(pb::GetGlueVersionResponse {
        version: Some(version_to_pb(version)),
    })
}

async fn load_job(store: &Store, id: JobId) -> Result<crate::model::Job, Error> {
    store.get_job(id).await?.ok_or_else(|| job_not_found(id))
}

fn job_not_found(id: JobId) -> Error {
    Error::NotFound(format!("job {id} not found"))
}

fn version_to_pb(version: GlueVersion) -> pb::GlueVersion {
    pb::GlueVersion {
        id: version.id,
        job_id: version.job_id.0,
        glue_type: glue_type_to_pb(version.glue_type) as i32,
        glue_source: version.glue_source,
        glue_remark: version.glue_remark,
        created_ms: version.created_ms,
    }
}
