-- Jitter: the most milliseconds each scheduled fire of the job is held back (docs/scheduling.md).
-- 0 keeps the fires on their second, as before.
ALTER TABLE xjob_job ADD COLUMN jitter_max_ms BIGINT NOT NULL DEFAULT 0;
