//! What the shared statements need from a database driver: binding and decoding the domain's
//! value types and running a statement on a connection (`Driver`). `sql.rs` builds statements
//! over it; `dialect.rs` adds what is spelled differently per database.
//!
//! Binding and decoding are expressed as supertraits with blanket impls (`Binds`, `Decodes`),
//! because Rust only carries bounds on `Self` to the users of a trait: a bound such as
//! "`i64` encodes for this database", written as a where-clause, would have to be repeated on
//! every generic function.
//!
//! Each backend implements the trait in its own folder (`sqlite/dialect.rs`,
//! `postgres/dialect.rs`, `mysql/dialect.rs`), next to its `Dialect`.

use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::{ColumnIndex, Database, Decode, Encode, Row, Type};

/// A boxed, sendable future (what sqlx's executors return).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// A statement's rows as they come (sqlx's own stream type, named without a new dependency).
pub type BoxStream<'a, T> = Pin<Box<dyn tokio_stream::Stream<Item = T> + Send + 'a>>;

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

/// One database driver: the sqlx bounds the shared statements rely on (binding and decoding the
/// domain's value types) and running a statement on a connection. `Sql` and `Cols` need only
/// this; what is spelled differently per database is `Dialect`'s (`dialect.rs`).
pub trait Driver:
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
    /// Runs a statement and hands its rows over one at a time, as the database sends them.
    fn fetch<'e, 'q: 'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        args: Self::Arguments<'q>,
    ) -> BoxStream<'e, Result<Self::Row, sqlx::Error>>;
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

        fn fetch<'e, 'q: 'e>(
            conn: &'e mut Self::Connection,
            sql: &'e str,
            args: Self::Arguments<'q>,
        ) -> $crate::store::driver::BoxStream<'e, Result<Self::Row, sqlx::Error>> {
            sqlx::query_with::<$db, _>(sql, args).fetch(conn)
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

// The backends' `impl Driver` (in `sqlite/`, `postgres/`, `mysql/`) use these by path.
pub(super) use {runners, text_as_declared};
