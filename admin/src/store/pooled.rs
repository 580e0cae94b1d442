//! The check every backend's pool runs before handing a connection out again.

/// Whether a pooled connection may be handed out again (every pool's `before_acquire` check).
///
/// The driver counts the transactions it opened on a connection and refuses to begin one while
/// that count is not zero. A transaction whose COMMIT or ROLLBACK failed can leave the count
/// behind the database's real state: SQLite rolls a transaction back by itself on a full disk
/// or an I/O error, the driver's ROLLBACK on drop then fails ("no transaction is active"), and
/// the count stays at one. Reused, such a connection fails every later `BEGIN` ("attempted to
/// call begin_with at non-zero transaction depth"), which stopped the schedule for good after
/// a full disk. By the time a connection is acquired again its drop-time rollback has run (the
/// pool pings it on release), so a connection still counted inside a transaction is closed and
/// a fresh one opened instead.
pub(super) fn reusable<C: sqlx::Connection>(conn: &C) -> bool {
    static REPLACED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let clean = !conn.is_in_transaction();
    if !clean {
        // Once per failed transaction during a fault: the first and every hundredth are
        // warnings, the failing loops' own warnings and health say the rest.
        let replaced = REPLACED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if replaced % 100 == 1 {
            tracing::warn!(
                replaced,
                "closing a database connection left inside a failed transaction; opening a new one"
            );
        } else {
            tracing::debug!(
                replaced,
                "closing a connection left inside a failed transaction"
            );
        }
    }
    clean
}
