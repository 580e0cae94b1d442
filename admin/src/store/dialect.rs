//! What differs between the three SQL dialects, in one trait.
//!
//! Every store statement is written once, as a generic function over `DB: Dialect` (see
//! `shared/`). `Dialect` stands on the driver's binding, decoding and running (`Driver`, in
//! `driver.rs`) and adds the few SQL fragments that are spelled differently. Statements whose
//! *shape* differs (the schedule lock, batch forms, upserts, inserts that return ids) ask the
//! dialect for that piece by name instead of branching on the backend.
//!
//! Each backend implements the trait in its own folder (`sqlite/dialect.rs`,
//! `postgres/dialect.rs`, `mysql/dialect.rs`), so this file names no backend.

use super::driver::{BoxFuture, Driver};
use super::error::StoreResult;
use super::round::JobScheduleUpdate;
use super::sql::Sql;

/// One SQL dialect: what is spelled differently, over the driver's binding, decoding and
/// running (`Driver`).
pub trait Dialect: Driver {
    /// `INSERT … RETURNING id` exists (not on MySQL/MariaDB: the insert id is read instead).
    const INSERT_RETURNING: bool;
    /// Position of a substring in a string, 1-based, 0 when absent: `FN(haystack, needle)`.
    const POSITION_FN: &'static str;

    /// Most ids `push_id_list` takes at once (those binding one value per id are limited by
    /// the server's parameter count).
    const IDS_PER_STATEMENT: usize;

    /// Appends ` IN (…)` (or its equivalent) over `ids` to a condition on an id column. SQLite
    /// and PostgreSQL bind the list as one value (a JSON array, an array), so the text never
    /// changes and stays prepared; SQLite then looks each id up by primary key.
    fn push_id_list(sql: &mut Sql<'_, Self>, ids: &[i64]);

    /// One connection writes at a time (SQLite): statements that other backends must order or
    /// lock to stay correct under concurrent writers need neither here.
    const SINGLE_WRITER: bool;
    /// The row-lock clause of a `SELECT` that picks rows to change (empty on SQLite, whose
    /// single writer excludes the others).
    const FOR_UPDATE: &'static str;
    /// The row-lock clause that leaves rows other transactions hold to them (empty on
    /// SQLite).
    const FOR_UPDATE_SKIP_LOCKED: &'static str;
    /// The shared row-lock clause: holders exclude `FOR UPDATE` but not each other (empty on
    /// SQLite).
    const FOR_SHARE: &'static str;
    /// Conditions on dead admin nodes name them as a list read first, not as a subquery on
    /// `xjob_node`: a MySQL locking read would lock the node rows its subquery reads.
    const GONE_NODES_AS_LIST: bool;
    /// A single-table `DELETE` takes `ORDER BY … LIMIT` itself, and a `LIMIT` inside an `IN`
    /// subquery is refused (MySQL); the others bound a deletion by a subquery.
    const DELETE_TAKES_LIMIT: bool;

    /// What makes `ORDER BY` on a text column sort by bytes, as SQLite does, whatever the
    /// server's locale (MySQL's `utf8mb4_bin` columns already sort by code point).
    const BYTE_ORDER: &'static str;

    /// The database's clock as epoch milliseconds (a `bigint` expression). Node leases are
    /// written and judged by it, so admins whose own clocks disagree still agree on whose
    /// lease has lapsed.
    const NOW_MS: &'static str;

    /// The tail of an `INSERT` that, when a row with the same `key` exists, overwrites its
    /// `columns` with the inserted values instead.
    fn upsert(key: &str, columns: &[&str]) -> String {
        let sets: Vec<String> = columns
            .iter()
            .map(|column| format!("{column} = excluded.{column}"))
            .collect();
        format!("ON CONFLICT ({key}) DO UPDATE SET {}", sets.join(", "))
    }

    /// Writes the schedule round's next fire times in batches, guarded by `trigger_status = 1`
    /// so a job stopped while the round ran stays stopped (each backend's `jobs.rs`: a bound
    /// `VALUES` list, parallel arrays through `UNNEST`, `CASE id WHEN … END`).
    fn write_schedule_updates<'c>(
        conn: &'c mut Self::Connection,
        updates: &'c [JobScheduleUpdate],
    ) -> BoxFuture<'c, StoreResult<()>>;
}
