-- Execution semantics: delayed retries, follow-up processing of finished runs, alarm switch.

-- When a PENDING run may be dispatched: a retry waits for its backoff delay (0 = at once).
ALTER TABLE xjob_log ADD COLUMN dispatch_at_ms BIGINT NOT NULL DEFAULT 0;
-- Finished runs not yet followed up (retry, alarm, children, FIX_DELAY) have alarm_status 0.
CREATE INDEX ix_log_followup ON xjob_log (alarm_status, status);
CREATE INDEX ix_log_dispatch_at ON xjob_log (status, dispatch_at_ms);

ALTER TABLE xjob_job ADD COLUMN alarm_on_every_failure BOOLEAN NOT NULL DEFAULT FALSE;
