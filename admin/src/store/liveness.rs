//! Liveness locks: one lock per admin node, held for the admin process's life, that the
//! database (or the kernel) releases the moment that process dies.
//!
//! A node's lease (`xjob_node.lease_until_ms`) needs a whole lease to say that an admin is
//! gone. A dead admin's database session, though, ends at once (the kernel closes its sockets
//! and files), so a lock tied to that session tells the other admins right away:
//!
//! - **PostgreSQL**: a session-level advisory lock (`pg_try_advisory_lock`) on a key derived
//!   from the node id, held on a connection of its own. Others read `pg_locks`, which takes
//!   nothing.
//! - **MySQL/MariaDB**: a named lock (`GET_LOCK(name, 0)`) on a connection of its own; the name
//!   is derived from the database and the node id (named locks are server-wide). Others ask
//!   `IS_USED_LOCK`, which takes nothing.
//! - **SQLite** (admins sharing one file): an exclusive `flock` on a file next to the database,
//!   `<database>-node-<hash>.lock`. Others try the lock and let it go at once.
//!
//! The lock's connection is never a pooled one: a pool would hand it back and reuse it (the
//! lock would then be held by whatever borrows it next) or close it when idle (the lock would
//! vanish while the admin lives).
//!
//! A free lock is only evidence of death for a node whose lock was *seen held* in the same
//! epoch (see `schedule::liveness`): a node that never took one (an older admin, or one whose
//! lock connection failed) is judged by its lease alone.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use sqlx::mysql::MySqlConnection;
use sqlx::postgres::PgConnection;
use sqlx::{ConnectOptions, Connection};

use super::{Store, StoreError, StoreResult};

/// This node's liveness lock, held while the value lives (dropping it closes the connection or
/// the file, which releases the lock).
pub struct NodeLock {
    held: Held,
}

enum Held {
    Postgres(PgConnection),
    Mysql(MySqlConnection),
    File(#[allow(dead_code)] File),
    /// An in-memory SQLite database: no other admin can share it, so nothing to lock.
    Nothing,
}

impl NodeLock {
    /// A round trip on the lock's connection: while the session lives, the lock is held (it is
    /// never released otherwise). An error means the session is gone (the server restarted,
    /// the network dropped) and with it the lock: the caller drops this value and acquires
    /// again.
    pub async fn confirm(&mut self) -> StoreResult<()> {
        match &mut self.held {
            Held::Postgres(conn) => conn.ping().await.map_err(StoreError::Unavailable),
            Held::Mysql(conn) => conn.ping().await.map_err(StoreError::Unavailable),
            // A file lock lasts as long as the open file: nothing can take it away.
            Held::File(_) | Held::Nothing => Ok(()),
        }
    }
}

impl Store {
    /// Takes this node's liveness lock; `None` when another process holds it (an admin with
    /// the same node id still running, or another admin checking it at this very instant).
    pub async fn acquire_node_lock(&self, node_id: &str) -> StoreResult<Option<NodeLock>> {
        let held = match self {
            Store::Postgres(backend) => {
                let mut conn = backend
                    .options
                    .clone()
                    .application_name("xjob-admin-liveness")
                    .connect()
                    .await
                    .map_err(StoreError::Unavailable)?;
                let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                    .bind(advisory_key(node_id))
                    .fetch_one(&mut conn)
                    .await
                    .map_err(StoreError::Unavailable)?;
                taken.then_some(Held::Postgres(conn))
            }
            Store::Mysql(backend) => {
                let mut conn = backend
                    .options
                    .connect()
                    .await
                    .map_err(StoreError::Unavailable)?;
                let taken: Option<i64> =
                    sqlx::query_scalar(&format!("SELECT GET_LOCK({MYSQL_LOCK_NAME}, 0)"))
                        .bind(node_id)
                        .fetch_one(&mut conn)
                        .await
                        .map_err(StoreError::Unavailable)?;
                (taken == Some(1)).then_some(Held::Mysql(conn))
            }
            Store::Sqlite(backend) => match &backend.file {
                None => Some(Held::Nothing),
                Some(database) => try_lock_file(&lock_file(database, node_id))?.map(Held::File),
            },
        };
        Ok(held.map(|held| NodeLock { held }))
    }

    /// Whether each node of `node_ids` holds its liveness lock right now (in order).
    pub async fn node_locks_held(&self, node_ids: &[String]) -> StoreResult<Vec<bool>> {
        let mut held = Vec::with_capacity(node_ids.len());
        match self {
            Store::Postgres(backend) => {
                let mut conn = backend.pools().read().await?;
                for node_id in node_ids {
                    let key = advisory_key(node_id);
                    // A bigint key shows in pg_locks as its high and low 32 bits.
                    let found: bool = sqlx::query_scalar(
                        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
                         AND granted AND objsubid = 1 AND classid::bigint = $1 \
                         AND objid::bigint = $2 AND database = \
                         (SELECT oid FROM pg_database WHERE datname = current_database()))",
                    )
                    .bind(key >> 32)
                    .bind(key & 0xFFFF_FFFF)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(StoreError::Unavailable)?;
                    held.push(found);
                }
            }
            Store::Mysql(backend) => {
                let mut conn = backend.pools().read().await?;
                for node_id in node_ids {
                    let used: Option<i64> =
                        sqlx::query_scalar(&format!("SELECT IS_USED_LOCK({MYSQL_LOCK_NAME})"))
                            .bind(node_id)
                            .fetch_one(&mut *conn)
                            .await
                            .map_err(StoreError::Unavailable)?;
                    held.push(used.is_some());
                }
            }
            Store::Sqlite(backend) => {
                for node_id in node_ids {
                    let found = match &backend.file {
                        None => false,
                        // Free if this process can take it; let go at once (the drop).
                        Some(database) => try_lock_file(&lock_file(database, node_id))?.is_none(),
                    };
                    held.push(found);
                }
            }
        }
        Ok(held)
    }
}

/// The named lock of the node id bound as the statement's one parameter: named locks are
/// server-wide, so the database's name is part of it; hashed, because names are limited to
/// 64 characters.
const MYSQL_LOCK_NAME: &str =
    "CONCAT('xjob-node-', LEFT(SHA2(CONCAT(DATABASE(), '/', ?), 256), 40))";

/// The advisory-lock key of a node id: 63 bits of its FNV-1a hash (non-negative, so its two
/// 32-bit halves compare plainly in `pg_locks`). Advisory locks are per database.
fn advisory_key(node_id: &str) -> i64 {
    (fnv1a(node_id.as_bytes()) & i64::MAX as u64) as i64
}

/// FNV-1a, 64 bits: a stable hash (the same in every admin build), unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `<database>-node-<hash>.lock`, next to the database file (node ids may hold any character,
/// so the name carries their hash).
fn lock_file(database: &Path, node_id: &str) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(format!("-node-{:016x}.lock", fnv1a(node_id.as_bytes())));
    PathBuf::from(name)
}

/// Opens (creating) `path` and takes its exclusive lock without waiting; `None` when another
/// open file holds it.
fn try_lock_file(path: &Path) -> StoreResult<Option<File>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|error| lock_file_error(path, error))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(error)) => Err(lock_file_error(path, error)),
    }
}

fn lock_file_error(path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Unavailable(sqlx::Error::Io(std::io::Error::new(
        error.kind(),
        format!("node lock file {}: {error}", path.display()),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_non_negative() {
        // Every admin build must derive the same key from the same node id.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert!(advisory_key("admin-127.0.0.1:8080") >= 0);
        assert_ne!(advisory_key("a"), advisory_key("b"));
        let file = lock_file(Path::new("/data/xjob.db"), "n1");
        assert!(file.to_string_lossy().starts_with("/data/xjob.db-node-"));
    }
}
