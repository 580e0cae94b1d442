//! The pieces every shared statement is built from: `Sql` (text plus bound values, with each
//! driver's own placeholders), `Pools` (where to write and where to read) and `Cols` (typed
//! column reads that name the column in errors).

use sqlx::error::BoxDynError;
use sqlx::pool::PoolConnection;
use sqlx::{Arguments, Pool, Transaction};

use crate::model::{GroupId, JobId, LogId};

use super::driver::{Binds, Decodes, Driver, Executed};
use super::error::{StoreError, StoreResult};

/// One statement being built: text with placeholders and the values bound to them, in order.
/// Like `sqlx::QueryBuilder`, but runnable from code generic over the database.
pub struct Sql<'q, DB: Driver> {
    text: String,
    args: DB::Arguments<'q>,
    /// The first value that failed to encode; reported when the statement runs.
    error: Option<BoxDynError>,
}

impl<'q, DB: Driver> Sql<'q, DB> {
    pub fn new(text: impl Into<String>) -> Self {
        Sql {
            text: text.into(),
            args: DB::Arguments::default(),
            error: None,
        }
    }

    /// Appends SQL text.
    pub fn push(mut self, text: &str) -> Self {
        self.text.push_str(text);
        self
    }

    /// Binds a value and appends its placeholder (`?` or `$n`).
    pub fn bind<T>(mut self, value: T) -> Self
    where
        DB: Binds<'q, T>,
    {
        self.bind_mut(value);
        self
    }

    /// `bind` for statements built in a loop.
    pub fn bind_mut<T>(&mut self, value: T)
    where
        DB: Binds<'q, T>,
    {
        if let Err(error) = <DB as Binds<'q, T>>::add(&mut self.args, value) {
            self.error.get_or_insert(error);
        }
        // Writing into a String cannot fail.
        let _ = self.args.format_placeholder(&mut self.text);
    }

    /// `push` for statements built in a loop.
    pub fn push_mut(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// The statement's text (the SQLite plan test explains it).
    #[cfg(test)]
    pub fn text(&self) -> &str {
        &self.text
    }

    fn checked(self) -> StoreResult<(String, DB::Arguments<'q>)> {
        match self.error {
            Some(error) => Err(StoreError::Unavailable(sqlx::Error::Encode(error))),
            None => Ok((self.text, self.args)),
        }
    }

    pub async fn fetch_all(self, conn: &mut DB::Connection) -> StoreResult<Vec<DB::Row>> {
        let (text, args) = self.checked()?;
        DB::fetch_all(conn, &text, args).await.map_err(map_error)
    }

    /// Each row made into a `T` by `convert` as it arrives, so a large result is never held
    /// whole in the driver's row form: on SQLite each column value of a fetched row is an
    /// allocation of its own, several times the size of the value it holds.
    pub async fn fetch_map<T>(
        self,
        conn: &mut DB::Connection,
        convert: impl Fn(&DB::Row) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        use tokio_stream::StreamExt;
        let (text, args) = self.checked()?;
        let mut rows = DB::fetch(conn, &text, args);
        let mut converted = Vec::new();
        while let Some(row) = rows.next().await {
            converted.push(convert(&row.map_err(map_error)?)?);
        }
        Ok(converted)
    }

    pub async fn fetch_optional(self, conn: &mut DB::Connection) -> StoreResult<Option<DB::Row>> {
        let (text, args) = self.checked()?;
        DB::fetch_optional(conn, &text, args)
            .await
            .map_err(map_error)
    }

    pub async fn fetch_one(self, conn: &mut DB::Connection) -> StoreResult<DB::Row> {
        let (text, args) = self.checked()?;
        DB::fetch_optional(conn, &text, args)
            .await
            .map_err(map_error)?
            .ok_or(StoreError::Unavailable(sqlx::Error::RowNotFound))
    }

    pub async fn execute(self, conn: &mut DB::Connection) -> StoreResult<Executed> {
        let (text, args) = self.checked()?;
        DB::execute(conn, &text, args).await.map_err(map_error)
    }

    /// Rows affected.
    pub async fn affected(self, conn: &mut DB::Connection) -> StoreResult<u64> {
        Ok(self.execute(conn).await?.rows_affected)
    }

    /// The first column of each row, as `T`.
    pub async fn fetch_column<T>(self, conn: &mut DB::Connection) -> StoreResult<Vec<T>>
    where
        T: Column,
    {
        let rows = self.fetch_all(conn).await?;
        rows.iter().map(|row| T::first::<DB>(row)).collect()
    }

    /// The first column of the first row, as `T`.
    pub async fn fetch_scalar<T: Column>(self, conn: &mut DB::Connection) -> StoreResult<T> {
        let row = self.fetch_one(conn).await?;
        T::first::<DB>(&row)
    }
}

/// Where a backend writes and reads. SQLite has one writer connection and a pool of
/// read-only ones (see `sqlite/mod.rs`); the servers have one pool for both.
pub struct Pools<'a, DB: Driver> {
    pub writer: &'a Pool<DB>,
    pub reader: &'a Pool<DB>,
    /// On a single writer connection (SQLite): lets API writes go first (`writer_gate`).
    pub gate: Option<&'a super::writer_gate::WriterGate>,
    /// Read connections kept for work that goes first (API calls, the admin's urgent work), so
    /// a `GetJob` never queues behind the background loops' reads (SQLite; the servers' one
    /// pool is large enough).
    pub first_reader: Option<&'a Pool<DB>>,
}

impl<DB: Driver> Clone for Pools<'_, DB> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<DB: Driver> Copy for Pools<'_, DB> {}

impl<DB: Driver> Pools<'_, DB> {
    /// A connection for a statement that only reads.
    pub async fn read(&self) -> StoreResult<PoolConnection<DB>> {
        let pool = match self.first_reader {
            Some(first) if super::writer_gate::goes_first() => first,
            _ => self.reader,
        };
        pool.acquire().await.map_err(StoreError::Unavailable)
    }

    /// A connection for a statement that writes.
    pub async fn write(&self) -> StoreResult<PoolConnection<DB>> {
        let acquired = match self.gate {
            Some(gate) => gate.enter(|| self.writer.acquire()).await,
            None => self.writer.acquire().await,
        };
        acquired.map_err(StoreError::Unavailable)
    }

    /// A transaction on the writer.
    pub async fn begin(&self) -> StoreResult<Transaction<'static, DB>> {
        let begun = match self.gate {
            Some(gate) => gate.enter(|| self.writer.begin()).await,
            None => self.writer.begin().await,
        };
        begun.map_err(StoreError::Unavailable)
    }

    /// A transaction on the writer opened by `statement` (SQLite's `BEGIN IMMEDIATE`, which takes
    /// the write lock up front), through the gate like [`Pools::begin`].
    pub async fn begin_with(
        &self,
        statement: &'static str,
    ) -> StoreResult<Transaction<'static, DB>> {
        let begun = match self.gate {
            Some(gate) => gate.enter(|| self.writer.begin_with(statement)).await,
            None => self.writer.begin_with(statement).await,
        };
        begun.map_err(StoreError::Unavailable)
    }
}

/// Commits a transaction.
pub async fn commit<DB: Driver>(tx: Transaction<'static, DB>) -> StoreResult<()> {
    tx.commit().await.map_err(map_error)
}

/// Maps a driver error to the store's error: unique violations become `Conflict`.
pub fn map_error(error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db_error) = &error
        && db_error.is_unique_violation()
    {
        return StoreError::Conflict(db_error.message().to_string());
    }
    StoreError::Unavailable(error)
}

/// A value type read from a column.
pub trait Column: Sized {
    fn read<DB: Driver>(row: &DB::Row, column: &str) -> Result<Self, sqlx::Error>;
    /// The first column, whatever its name.
    fn first<DB: Driver>(row: &DB::Row) -> StoreResult<Self> {
        use sqlx::{Column as _, Row as _};
        let name = row
            .columns()
            .first()
            .map(|column| column.name().to_string())
            .unwrap_or_default();
        Self::read::<DB>(row, &name).map_err(|error| corrupt(&name, error))
    }
}

macro_rules! decoded_as_declared {
    ($($ty:ty),*) => {$(
        impl Column for $ty {
            fn read<DB: Driver>(row: &DB::Row, column: &str) -> Result<Self, sqlx::Error> {
                <DB as Decodes<$ty>>::get(row, column)
            }
        }
    )*};
}
decoded_as_declared!(i64, i32, f64, bool, Option<i64>);

/// Typed ids decode at the row: a caller of the store never holds a bare `i64` where a
/// `JobId`, `LogId` or `GroupId` is meant.
macro_rules! typed_id_column {
    ($($ty:ty),*) => {$(
        impl Column for $ty {
            fn read<DB: Driver>(row: &DB::Row, column: &str) -> Result<Self, sqlx::Error> {
                <DB as Decodes<i64>>::get(row, column).map(<$ty>::from)
            }
        }
    )*};
}
typed_id_column!(JobId, LogId, GroupId);

impl Column for String {
    fn read<DB: Driver>(row: &DB::Row, column: &str) -> Result<Self, sqlx::Error> {
        DB::text(row, column)
    }
}

impl Column for Option<String> {
    fn read<DB: Driver>(row: &DB::Row, column: &str) -> Result<Self, sqlx::Error> {
        DB::opt_text(row, column)
    }
}

/// Typed reads from one row, naming the column when a value does not decode.
pub struct Cols<'r, DB: Driver>(pub &'r DB::Row);

impl<DB: Driver> Cols<'_, DB> {
    pub fn get<T: Column>(&self, column: &str) -> StoreResult<T> {
        T::read::<DB>(self.0, column).map_err(|error| corrupt(column, error))
    }

    /// A text column holding one of an enum's names.
    pub fn parse<T>(&self, column: &str, parse: fn(&str) -> Option<T>) -> StoreResult<T> {
        let text: String = self.get(column)?;
        parse(&text)
            .ok_or_else(|| StoreError::Corrupt(format!("column {column}: unknown value '{text}'")))
    }
}

fn corrupt(column: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("column {column}: {error}"))
}
