-- Overlap policy: what the admin does with a scheduled fire of a job whose earlier run is still
-- going (docs/scheduling.md). ALLOW_ALL sends it anyway, as before. A fire held back by
-- BUFFER_ONE or BUFFER_ALL is a WAITING row until the earlier run ends.
ALTER TABLE xjob_job ADD COLUMN overlap_policy VARCHAR(16) NOT NULL DEFAULT 'ALLOW_ALL';
-- The follow-up loop's look for WAITING rows each round uses ix_log_dispatch_at (status, ...).
