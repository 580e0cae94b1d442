//! The shared row mapping (`shared::rows`) at this driver's row type, for the statements still
//! written per backend.

use sqlx::postgres::PgRow;

use crate::model::RunLog;
use crate::store::StoreResult;
use crate::store::shared::rows as shared;
pub use crate::store::shared::rows::LOG_COLUMNS;

pub fn run_from_row(row: &PgRow) -> StoreResult<RunLog> {
    shared::run_from_row::<sqlx::Postgres>(row)
}
