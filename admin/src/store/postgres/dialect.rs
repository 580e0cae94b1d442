//! PostgreSQL's answers to `Dialect`: `RETURNING`, row locks with `SKIP LOCKED`, id lists as
//! one bound array, byte-order text comparison.

use sqlx::Row;

use crate::store::dialect::Dialect;
use crate::store::driver::{BoxFuture, Driver, Executed, runners, text_as_declared};
use crate::store::sql::Sql;
use crate::store::{JobScheduleUpdate, StoreResult};

impl Dialect for sqlx::Postgres {
    const INSERT_RETURNING: bool = true;
    const POSITION_FN: &'static str = "strpos";
    const SINGLE_WRITER: bool = false;
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const FOR_SHARE: &'static str = " FOR SHARE";
    const GONE_NODES_AS_LIST: bool = false;
    const DELETE_TAKES_LIMIT: bool = false;
    const BYTE_ORDER: &'static str = " COLLATE \"C\"";
    // The time the statement runs, not the transaction's start (`now()`).
    const NOW_MS: &'static str = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";
    const IDS_PER_STATEMENT: usize = usize::MAX;

    fn push_id_list(sql: &mut Sql<'_, Self>, ids: &[i64]) {
        sql.push_mut(" = ANY(");
        sql.bind_mut(ids.to_vec());
        sql.push_mut(")");
    }

    fn write_schedule_updates<'c>(
        conn: &'c mut Self::Connection,
        updates: &'c [JobScheduleUpdate],
    ) -> BoxFuture<'c, StoreResult<()>> {
        Box::pin(super::jobs::write_schedule_updates(conn, updates))
    }
}

impl Driver for sqlx::Postgres {
    text_as_declared!();

    runners!(sqlx::Postgres, |result| None);
}
