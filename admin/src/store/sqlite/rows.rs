//! The shared row mapping (`shared::rows`) at this driver's row type, for the statements still
//! written per backend.

use sqlx::sqlite::SqliteRow;

use crate::model::{Job, RunLog};
use crate::store::StoreResult;
use crate::store::shared::rows as shared;
pub use crate::store::shared::rows::{JOB_COLUMNS, LOG_COLUMNS};

pub fn job_from_row(row: &SqliteRow) -> StoreResult<Job> {
    shared::job_from_row::<sqlx::Sqlite>(row)
}

pub fn run_from_row(row: &SqliteRow) -> StoreResult<RunLog> {
    shared::run_from_row::<sqlx::Sqlite>(row)
}
