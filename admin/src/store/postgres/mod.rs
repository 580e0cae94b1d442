//! The PostgreSQL backend (15+): a connection pool, embedded migrations, and the schedule lock
//! as `SELECT … FOR UPDATE` on the `schedule_lock` row.

mod stubs;

use sqlx::PgPool;

use super::{StoreError, StoreResult};

/// A pool of connections to one PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects and migrates.
    pub async fn connect(url: &str) -> StoreResult<PgStore> {
        let pool = PgPool::connect(url).await.map_err(StoreError::Unavailable)?;
        Ok(PgStore { pool })
    }
}

/// Creates a uniquely named database next to the one in `base_url`; returns its URL.
pub async fn create_scratch_database(base_url: &str) -> StoreResult<String> {
    Err(StoreError::InvalidUrl(format!("postgres scratch databases are not written yet: {base_url}")))
}
