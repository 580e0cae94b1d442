//! Operations data and housekeeping of the run log table, all in the admin's zone:
//!
//! ```text
//! report  ── every report_interval ──▶ recount today + 2 previous days ──▶ xjob_log_report
//!         ◀── GetDashboard reads the report rows of a day range (older days stay frozen)
//! cleanup ── ClearLogs (9 modes) ─┐
//!         ── every retention_interval (log_retention_days) ─┴▶ delete finished runs, 1000 a batch
//! ```
//!
//! Both loops are idempotent and need no coordination between admins: a report row is always
//! recomputed from the log rows, and a deletion repeated by another admin deletes nothing more.
//! Run-log files on executors are swept by the SDK itself (one folder per day).

pub mod cleanup;
pub mod days;
pub mod report;
