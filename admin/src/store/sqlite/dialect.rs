//! SQLite's answers to `Dialect`: `RETURNING`, one writer (so no row locks), id lists as one
//! JSON array bound once.

use sqlx::Row;

use crate::store::batch_json;
use crate::store::dialect::Dialect;
use crate::store::driver::{BoxFuture, Driver, Executed, runners, text_as_declared};
use crate::store::sql::Sql;
use crate::store::{JobScheduleUpdate, StoreResult};

impl Dialect for sqlx::Sqlite {
    const INSERT_RETURNING: bool = true;
    const POSITION_FN: &'static str = "instr";
    const SINGLE_WRITER: bool = true;
    const FOR_UPDATE: &'static str = "";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = "";
    const FOR_SHARE: &'static str = "";
    const GONE_NODES_AS_LIST: bool = false;
    const DELETE_TAKES_LIMIT: bool = false;
    const BYTE_ORDER: &'static str = "";
    // The machine's clock: every admin sharing the file runs on that machine.
    const NOW_MS: &'static str =
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";
    const IDS_PER_STATEMENT: usize = usize::MAX;

    fn push_id_list(sql: &mut Sql<'_, Self>, ids: &[i64]) {
        sql.push_mut(" IN (SELECT value FROM json_each(");
        sql.bind_mut(batch_json::ids(ids));
        sql.push_mut("))");
    }

    fn write_schedule_updates<'c>(
        conn: &'c mut Self::Connection,
        updates: &'c [JobScheduleUpdate],
    ) -> BoxFuture<'c, StoreResult<()>> {
        Box::pin(super::jobs::write_schedule_updates(conn, updates))
    }
}

impl Driver for sqlx::Sqlite {
    text_as_declared!();

    runners!(sqlx::Sqlite, |result| None);
}
