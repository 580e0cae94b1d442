//! Web console sessions (`xjob_console_session`), found by the hash of their cookie.

use crate::model::ConsoleSession;
use crate::store::StoreResult;
use crate::store::dialect::Dialect;
use crate::store::sql::{Cols, Pools, Sql};

/// Stores a new session.
pub async fn insert_console_session<DB: Dialect>(
    db: Pools<'_, DB>,
    session: &ConsoleSession,
) -> StoreResult<()> {
    Sql::<DB>::new(
        "INSERT INTO xjob_console_session (token_hash, user_id, csrf_token, created_ms, \
         expires_ms) VALUES (",
    )
    .bind(session.token_hash.as_str())
    .push(", ")
    .bind(session.user_id)
    .push(", ")
    .bind(session.csrf_token.as_str())
    .push(", ")
    .bind(session.created_ms)
    .push(", ")
    .bind(session.expires_ms)
    .push(")")
    .execute(&mut *db.write().await?)
    .await?;
    Ok(())
}

/// The session whose cookie hashes to `token_hash`, expired or not (the caller judges).
pub async fn console_session<DB: Dialect>(
    db: Pools<'_, DB>,
    token_hash: &str,
) -> StoreResult<Option<ConsoleSession>> {
    let row = Sql::<DB>::new(
        "SELECT token_hash, user_id, csrf_token, created_ms, expires_ms \
         FROM xjob_console_session WHERE token_hash = ",
    )
    .bind(token_hash)
    .fetch_optional(&mut *db.read().await?)
    .await?;
    row.as_ref()
        .map(|row| {
            let row = Cols::<DB>(row);
            Ok(ConsoleSession {
                token_hash: row.get("token_hash")?,
                user_id: row.get("user_id")?,
                csrf_token: row.get("csrf_token")?,
                created_ms: row.get("created_ms")?,
                expires_ms: row.get("expires_ms")?,
            })
        })
        .transpose()
}

/// Ends a session (logout).
pub async fn delete_console_session<DB: Dialect>(
    db: Pools<'_, DB>,
    token_hash: &str,
) -> StoreResult<()> {
    Sql::<DB>::new("DELETE FROM xjob_console_session WHERE token_hash = ")
        .bind(token_hash)
        .execute(&mut *db.write().await?)
        .await?;
    Ok(())
}

/// Deletes sessions that expired before `now_ms`; returns how many.
pub async fn prune_console_sessions<DB: Dialect>(
    db: Pools<'_, DB>,
    now_ms: i64,
) -> StoreResult<u64> {
    Sql::<DB>::new("DELETE FROM xjob_console_session WHERE expires_ms < ")
        .bind(now_ms)
        .affected(&mut *db.write().await?)
        .await
}
