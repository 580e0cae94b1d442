//! The MySQL 8 / MariaDB 10.6+ backend: a connection pool, embedded migrations, and the
//! schedule lock as `SELECT … FOR UPDATE` on the `schedule_lock` row.

mod stubs;

use sqlx::MySqlPool;

use super::{StoreError, StoreResult};

/// A pool of connections to one MySQL/MariaDB database.
#[derive(Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
}

impl MySqlStore {
    /// Connects and migrates.
    pub async fn connect(url: &str) -> StoreResult<MySqlStore> {
        let pool = MySqlPool::connect(url).await.map_err(StoreError::Unavailable)?;
        Ok(MySqlStore { pool })
    }
}

/// Creates a uniquely named database next to the one in `base_url`; returns its URL.
pub async fn create_scratch_database(base_url: &str) -> StoreResult<String> {
    Err(StoreError::InvalidUrl(format!("mysql scratch databases are not written yet: {base_url}")))
}
