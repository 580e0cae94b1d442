-- Catch-up window: how old a missed fire may be and still run when found (docs/scheduling.md),
-- and which of the missed fires inside it run. 0 keeps the misfire strategy in charge, as before.
ALTER TABLE xjob_job ADD COLUMN catch_up_window_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE xjob_job ADD COLUMN catch_up_mode VARCHAR(16) NOT NULL DEFAULT 'LATEST';
