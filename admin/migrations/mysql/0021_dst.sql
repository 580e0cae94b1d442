-- Daylight-saving policy of a job's cron (docs/scheduling.md): what a local time its zone skips
-- (spring forward) or repeats (fall back) does. The defaults are the behaviour before the policy.
ALTER TABLE xjob_job ADD COLUMN dst_gap_policy VARCHAR(16) NOT NULL DEFAULT 'NEXT_VALID_TIME';
ALTER TABLE xjob_job ADD COLUMN dst_overlap_policy VARCHAR(16) NOT NULL DEFAULT 'FIRST';
