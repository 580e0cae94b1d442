//! The size of the run log: below the store's entry points and the backends that measure it.

/// The size of the run log, as each database reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStorage {
    /// Rows in `xjob_log`.
    pub rows: i64,
    /// SQLite: the whole database file's pages in use (`page_count - freelist_count`, times the
    /// page size; the log table is nearly all of it), without the WAL file. PostgreSQL: the
    /// table with its indexes and TOAST (`pg_total_relation_size`), dead row versions included.
    /// MySQL/MariaDB: `data_length + index_length` from the table's statistics (refreshed by
    /// an `ANALYZE TABLE` first; InnoDB's figures are in whole pages).
    pub bytes: i64,
}
