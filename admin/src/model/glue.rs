//! Saved versions of a script job's source (XXL-JOB's GLUE history).

use super::{GlueType, JobId};

/// How many versions of a job's glue source are kept (XXL-JOB keeps 30 too).
pub const GLUE_VERSIONS_KEPT: i64 = 30;

/// One saved version of a job's glue source, newest has the highest id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlueVersion {
    pub id: i64,
    pub job_id: JobId,
    pub glue_type: GlueType,
    pub glue_source: String,
    pub glue_remark: String,
    pub created_ms: i64,
}

/// A new glue source for a job, saved as its current source and as a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlueEdit {
    pub job_id: JobId,
    pub glue_type: GlueType,
    pub glue_source: String,
    pub glue_remark: String,
    pub now_ms: i64,
}
