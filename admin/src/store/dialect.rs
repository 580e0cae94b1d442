//! What differs between the three SQL dialects, in one trait.
//!
//! Every store statement is written once, as a generic function over `DB: Dialect` (see
//! `shared/`). `Dialect` bundles the sqlx bounds those functions need (binding and decoding
//! the domain's value types, running a statement on a connection) and the few SQL fragments
//! that are spelled differently. Statements whose *shape* differs (the schedule lock, batch
//! forms, upserts, inserts that return ids) ask the dialect for that piece by name instead of
//! branching on the backend.
//!
//! Binding and decoding are expressed as supertraits with blanket impls (`Binds`, `Decodes`),
//! because Rust only carries bounds on `Self` to the users of a trait: a bound such as
//! "`i64` encodes for this database", written as a where-clause, would have to be repeated on
//! every generic function.
//!
//! Each backend implements the trait in its own folder (`sqlite/dialect.rs`,
//! `postgres/dialect.rs`, `mysql/dialect.rs`), so this file names no backend.

use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::{ColumnIndex, Database, Decode, Encode, Row, Type};

use super::sql::Sql;
use super::{JobScheduleUpdate, StoreResult};

/// A boxed, sendable future (what sqlx's executors return).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Outcome of a statement that returns no rows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Executed {
    pub rows_affected: u64,
    /// The auto-increment id of a one-row insert (MySQL; `None` where `RETURNING` is used).
    pub last_insert_id: Option<i64>,
}

/// A value type `T` that statements of this database can bind.
pub trait Binds<'q, T>: Database {
    fn add(args: &mut Self::Arguments<'q>, value: T) -> Result<(), BoxDynError>;
}

impl<'q, DB, T> Binds<'q, T> for DB
where
    DB: Database,
    T: 'q + Encode<'q, DB> + Type<DB>,
{
    fn add(args: &mut Self::Arguments<'q>, value: T) -> Result<(), BoxDynError> {
        sqlx::Arguments::add(args, value)
    }
}

/// A column type `T` that rows of this database decode as declared (numbers and booleans;
/// text goes through `Dialect::text`, see there).
pub trait Decodes<T>: Database {
    fn get(row: &Self::Row, column: &str) -> Result<T, sqlx::Error>;
}

impl<DB, T> Decodes<T> for DB
where
    DB: Database,
    T: for<'r> Decode<'r, DB> + Type<DB>,
    for<'a> &'a str: ColumnIndex<DB::Row>,
{
    fn get(row: &Self::Row, column: &str) -> Result<T, sqlx::Error> {
        row.try_get(column)
    }
}

/// One SQL dialect: the sqlx bounds the shared statements rely on, and what is spelled
/// differently.
pub trait Dialect:
    Database
    + for<'q> Binds<'q, i64>
    + for<'q> Binds<'q, i32>
    + for<'q> Binds<'q, f64>
    + for<'q> Binds<'q, bool>
    + for<'q> Binds<'q, &'q str>
    + for<'q> Binds<'q, String>
    + Decodes<i64>
    + Decodes<i32>
    + Decodes<f64>
    + Decodes<bool>
    + Decodes<Option<i64>>
{
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
    /// Conditions on dead admin nodes name them as a list read first, not as a subquery on
    /// `xjob_node`: a MySQL locking read would lock the node rows its subquery reads.
    const GONE_NODES_AS_LIST: bool;
    /// A single-table `DELETE` takes `ORDER BY … LIMIT` itself, and a `LIMIT` inside an `IN`
    /// subquery is refused (MySQL); the others bound a deletion by a subquery.
    const DELETE_TAKES_LIMIT: bool;

    /// What makes `ORDER BY` on a text column sort by bytes, as SQLite does, whatever the
    /// server's locale (MySQL's `utf8mb4_bin` columns already sort by code point).
    const BYTE_ORDER: &'static str;

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
    /// so a job stopped while the round ran stays stopped (each backend's `jobs.rs`: a JSON
    /// array through `json_each`, parallel arrays through `UNNEST`, `CASE id WHEN … END`).
    fn write_schedule_updates<'c>(
        conn: &'c mut Self::Connection,
        updates: &'c [JobScheduleUpdate],
    ) -> BoxFuture<'c, StoreResult<()>>;

    /// A text column. MySQL reads text through bytes: columns in a `_bin` collation carry the
    /// BINARY flag, which sqlx refuses to decode as `String`.
    fn text(row: &Self::Row, column: &str) -> Result<String, sqlx::Error>;
    /// A nullable text column (see `text`).
    fn opt_text(row: &Self::Row, column: &str) -> Result<Option<String>, sqlx::Error>;

    /// Runs a statement and returns its rows.
    fn fetch_all<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        args: Self::Arguments<'q>,
    ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>>;
    /// Runs a statement and returns its first row, if any.
    fn fetch_optional<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        args: Self::Arguments<'q>,
    ) -> BoxFuture<'e, Result<Option<Self::Row>, sqlx::Error>>;
    /// Runs a statement that returns no rows.
    fn execute<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        args: Self::Arguments<'q>,
    ) -> BoxFuture<'e, Result<Executed, sqlx::Error>>;
}

/// The statement runners, the same text for every driver (the types differ).
macro_rules! runners {
    ($db:ty, |$result:ident| $last_insert_id:expr) => {
        fn fetch_all<'e, 'q: 'e>(
            conn: &'e mut Self::Connection,
            sql: &'e str,
            args: Self::Arguments<'q>,
        ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>> {
            Box::pin(sqlx::query_with::<$db, _>(sql, args).fetch_all(conn))
        }

        fn fetch_optional<'e, 'q: 'e>(
            conn: &'e mut Self::Connection,
            sql: &'e str,
            args: Self::Arguments<'q>,
        ) -> BoxFuture<'e, Result<Option<Self::Row>, sqlx::Error>> {
            Box::pin(sqlx::query_with::<$db, _>(sql, args).fetch_optional(conn))
        }

        fn execute<'e, 'q: 'e>(
            conn: &'e mut Self::Connection,
            sql: &'e str,
            args: Self::Arguments<'q>,
        ) -> BoxFuture<'e, Result<Executed, sqlx::Error>> {
            Box::pin(async move {
                let $result = sqlx::query_with::<$db, _>(sql, args).execute(conn).await?;
                Ok(Executed {
                    rows_affected: $result.rows_affected(),
                    last_insert_id: $last_insert_id,
                })
            })
        }
    };
}

/// `Dialect::text` and `opt_text` where text columns decode as `String`.
macro_rules! text_as_declared {
    () => {
        fn text(row: &Self::Row, column: &str) -> Result<String, sqlx::Error> {
            row.try_get(column)
        }

        fn opt_text(row: &Self::Row, column: &str) -> Result<Option<String>, sqlx::Error> {
            row.try_get(column)
        }
    };
}

// The backends' `impl Dialect` (in `sqlite/`, `postgres/`, `mysql/`) use these by path.
pub(super) use {runners, text_as_declared};
