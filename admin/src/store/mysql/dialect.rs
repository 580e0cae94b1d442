//! MySQL's answers to `Dialect`: no `RETURNING` (ids come from the insert id), `ON DUPLICATE
//! KEY` upserts, bounded id lists, text read as bytes and checked to be UTF-8.

use sqlx::Row;

use crate::store::dialect::Dialect;
use crate::store::driver::{BoxFuture, Driver, Executed, runners};
use crate::store::sql::Sql;
use crate::store::{JobScheduleUpdate, StoreResult};

impl Dialect for sqlx::MySql {
    const INSERT_RETURNING: bool = false;
    const POSITION_FN: &'static str = "INSTR";
    const SINGLE_WRITER: bool = false;
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const FOR_SHARE: &'static str = " LOCK IN SHARE MODE";
    const GONE_NODES_AS_LIST: bool = true;
    const DELETE_TAKES_LIMIT: bool = true;
    const BYTE_ORDER: &'static str = "";
    // The time the function runs (`NOW()` is the statement's start); the session is UTC.
    const NOW_MS: &'static str = "CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)";

    fn upsert(_key: &str, columns: &[&str]) -> String {
        let sets: Vec<String> = columns
            .iter()
            .map(|column| format!("{column} = VALUES({column})"))
            .collect();
        format!("ON DUPLICATE KEY UPDATE {}", sets.join(", "))
    }
    /// MySQL allows 65 535 bound values per statement.
    const IDS_PER_STATEMENT: usize = 10_000;

    fn push_id_list(sql: &mut Sql<'_, Self>, ids: &[i64]) {
        sql.push_mut(" IN (");
        for (index, id) in ids.iter().enumerate() {
            if index > 0 {
                sql.push_mut(", ");
            }
            sql.bind_mut(*id);
        }
        sql.push_mut(")");
    }

    fn write_schedule_updates<'c>(
        conn: &'c mut Self::Connection,
        updates: &'c [JobScheduleUpdate],
    ) -> BoxFuture<'c, StoreResult<()>> {
        Box::pin(super::jobs::write_schedule_updates(conn, updates))
    }
}

impl Driver for sqlx::MySql {
    fn text(row: &Self::Row, column: &str) -> Result<String, sqlx::Error> {
        let bytes: Vec<u8> = row.try_get(column)?;
        utf8(bytes, column)
    }

    fn opt_text(row: &Self::Row, column: &str) -> Result<Option<String>, sqlx::Error> {
        let bytes: Option<Vec<u8>> = row.try_get(column)?;
        bytes.map(|bytes| utf8(bytes, column)).transpose()
    }

    runners!(sqlx::MySql, |result| i64::try_from(result.last_insert_id())
        .ok()
        .filter(|id| *id > 0));
}

/// Text read as bytes, checked to be UTF-8.
fn utf8(bytes: Vec<u8>, column: &str) -> Result<String, sqlx::Error> {
    String::from_utf8(bytes).map_err(|error| sqlx::Error::ColumnDecode {
        index: column.to_string(),
        source: Box::new(error),
    })
}
