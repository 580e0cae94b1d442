//! Rows of a batched write on SQLite as a `VALUES` list of bound parameters, the table `r` of
//! a `WITH r(…) AS (VALUES …)` prefix.
//!
//! The other backends unpack one JSON parameter in SQL (`store::batch_json`). On SQLite that
//! was a tenth of the writer thread's work at 5 000 fires/s: `json_each` renders each row
//! back to text and `json_extract` reads every column out of it, and the admin builds the JSON
//! first. Bound parameters skip all three. A statement's text depends on its row count, so a
//! batch is padded with rows of NULLs, which match no row, up to the next of a few sizes: each
//! statement has a handful of texts, and they stay prepared.

use std::sync::OnceLock;

use sqlx::Sqlite;
use sqlx::query::Query;
use sqlx::sqlite::SqliteArguments;

/// Most rows one statement carries; a larger batch takes several. A prepared statement grows
/// with its rows, and the writer keeps every text it ran: with 1 000-row texts beside these,
/// the set took about 4.5 MB instead of 1.6 for no fewer rows written per second.
pub(super) const ROWS_PER_STATEMENT: usize = 256;

/// The row counts a statement is written for; the last is the most a batch holds.
const SIZES: [usize; 5] = [1, 4, 16, 64, ROWS_PER_STATEMENT];

/// A statement ready for its rows' parameters.
pub(super) type SqliteQuery<'q> = Query<'q, Sqlite, SqliteArguments<'q>>;

/// One batched statement: its body reads the rows as table `r`.
pub(super) struct BatchStatement {
    columns: &'static [&'static str],
    body: &'static str,
    /// The full text for each of `SIZES`, built on first use.
    texts: OnceLock<Vec<String>>,
}

impl BatchStatement {
    pub(super) const fn new(columns: &'static [&'static str], body: &'static str) -> Self {
        BatchStatement {
            columns,
            body,
            texts: OnceLock::new(),
        }
    }

    /// The statement for `rows` rows (at most `ROWS_PER_STATEMENT`) and how many rows its text
    /// holds: bind the rows' columns in order, then `pad`, then the body's own parameters.
    pub(super) fn text_for(&'static self, rows: usize) -> (&'static str, usize) {
        debug_assert!(
            rows <= ROWS_PER_STATEMENT,
            "a batch of {rows} rows needs several statements"
        );
        let index = SIZES
            .iter()
            .position(|&size| size >= rows)
            .unwrap_or(SIZES.len() - 1);
        let texts = self.texts.get_or_init(|| {
            SIZES
                .iter()
                .map(|&size| statement_text(self.columns, size, self.body))
                .collect()
        });
        (texts[index].as_str(), SIZES[index])
    }

    /// The statement after its rows.
    #[cfg(test)]
    pub(super) fn body(&self) -> &'static str {
        self.body
    }

    /// Binds NULL to every column of the rows between `rows` and `size` (see `text_for`).
    pub(super) fn pad<'q>(
        &self,
        mut query: SqliteQuery<'q>,
        rows: usize,
        size: usize,
    ) -> SqliteQuery<'q> {
        for _ in 0..size.saturating_sub(rows) * self.columns.len() {
            query = query.bind(None::<i64>);
        }
        query
    }
}

fn statement_text(columns: &[&str], rows: usize, body: &str) -> String {
    let row = format!("({})", vec!["?"; columns.len()].join(", "));
    let mut text = format!("WITH r({}) AS (VALUES ", columns.join(", "));
    text.reserve(rows * (row.len() + 2) + body.len() + 2);
    for index in 0..rows {
        if index > 0 {
            text.push_str(", ");
        }
        text.push_str(&row);
    }
    text.push_str(") ");
    text.push_str(body);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    static STATEMENT: BatchStatement = BatchStatement::new(
        &["id", "name"],
        "SELECT id, name FROM r WHERE id IS NOT NULL",
    );

    #[test]
    fn a_batch_takes_the_smallest_size_that_holds_it() {
        assert_eq!(STATEMENT.text_for(1).1, 1);
        assert_eq!(STATEMENT.text_for(2).1, 4);
        assert_eq!(STATEMENT.text_for(64).1, 64);
        assert_eq!(STATEMENT.text_for(65).1, 256);
        assert_eq!(STATEMENT.text_for(ROWS_PER_STATEMENT).1, ROWS_PER_STATEMENT);
        assert_eq!(SIZES.last(), Some(&ROWS_PER_STATEMENT));
        assert_eq!(
            STATEMENT.text_for(2).0,
            "WITH r(id, name) AS (VALUES (?, ?), (?, ?), (?, ?), (?, ?)) \
             SELECT id, name FROM r WHERE id IS NOT NULL"
        );
    }

    /// Padding rows are NULLs, and every row of a full batch comes through in order.
    #[tokio::test]
    async fn rows_come_through_and_padding_matches_nothing() {
        use sqlx::{Connection, Row};
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("in-memory database");
        for rows in [1, 3, 65, ROWS_PER_STATEMENT] {
            let names: Vec<String> = (0..rows).map(|index| format!("row {index}")).collect();
            let (text, size) = STATEMENT.text_for(rows);
            let mut query = sqlx::query(text);
            for (index, name) in names.iter().enumerate() {
                query = query.bind(index as i64).bind(name.as_str());
            }
            let read: Vec<(i64, String)> = STATEMENT
                .pad(query, rows, size)
                .fetch_all(&mut conn)
                .await
                .expect("batch runs")
                .iter()
                .map(|row| (row.get(0), row.get(1)))
                .collect();
            let expected: Vec<(i64, String)> = names
                .into_iter()
                .enumerate()
                .map(|(index, name)| (index as i64, name))
                .collect();
            assert_eq!(read, expected, "{rows} rows in a statement for {size}");
        }
    }
}
