-- Overlap policy: what the admin does with a scheduled fire of a job whose earlier run is still
-- going (docs/scheduling.md). ALLOW_ALL sends it anyway, as before. A fire held back by
-- BUFFER_ONE or BUFFER_ALL is a WAITING row until the earlier run ends.
ALTER TABLE xjob_job ADD COLUMN overlap_policy TEXT NOT NULL DEFAULT 'ALLOW_ALL';
-- The follow-up loop looks for the oldest WAITING row of each job every round: only those rows.
CREATE INDEX ix_log_waiting ON xjob_log (job_id, id) WHERE status = 'WAITING';
