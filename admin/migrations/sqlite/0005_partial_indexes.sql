-- Every run's row goes PENDING → RUNNING → final. The two indexes on status,
-- (alarm_status, status) and (status, dispatch_at_ms), held every row of the table, so each of
-- those steps rewrote two entries in each of them. The monitors only ever look for small sets:
-- PENDING rows (to adopt), delayed PENDING rows (retries and child runs waiting for their time),
-- RUNNING rows (the lost-run monitor), finished rows not yet followed up, and follow-ups a node
-- claimed. Partial indexes hold just those rows, so a run that succeeds with nothing to follow up
-- costs four index entry changes instead of ten, and each lookup reads only the set it wants.
DROP INDEX ix_log_followup;
DROP INDEX ix_log_dispatch_at;
CREATE INDEX ix_log_pending ON xjob_log (owner_node, epoch) WHERE status = 'PENDING';
CREATE INDEX ix_log_delayed ON xjob_log (owner_node, epoch, dispatch_at_ms)
    WHERE status = 'PENDING' AND dispatch_at_ms > 0;
CREATE INDEX ix_log_running ON xjob_log (id) WHERE status = 'RUNNING';
CREATE INDEX ix_log_followup_due ON xjob_log (id)
    WHERE alarm_status = 0 AND status IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'KILLED', 'LOST', 'SKIPPED');
CREATE INDEX ix_log_followup_claimed ON xjob_log (owner_node, epoch) WHERE alarm_status = -1;
