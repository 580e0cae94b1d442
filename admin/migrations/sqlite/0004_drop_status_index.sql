-- ix_log_status (status) repeats the leading column of ix_log_dispatch_at (status,
-- dispatch_at_ms), which serves every lookup by status; dropping it saves one index update on
-- every insert and status change of a run.
DROP INDEX ix_log_status;
