//! The store's error, below the store's entry points and every backend that returns it.

use thiserror::Error;

/// Errors of the store, named after what a caller can do about them.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A unique constraint refused the write.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database could not be reached or answered with an error.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// A database named by the user could not be reached at all (a one-off connection, such as
    /// the import's source); the text says where and why.
    #[error("{0}")]
    Unreachable(String),
    /// A stored value could not be read back into a domain type.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The URL names no supported backend or is malformed.
    #[error("invalid database url: {0}")]
    InvalidUrl(String),
    /// Migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// The schema is missing something the admin needs (e.g. the schedule lock row).
    #[error("schema problem: {0}")]
    Schema(String),
}

pub type StoreResult<T> = Result<T, StoreError>;
