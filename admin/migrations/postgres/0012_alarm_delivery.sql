-- Where a run's alarm went: one line per channel (e-mail, webhook) with its outcome, or why none
-- was sent (rate limited, no channel). Written with the run's final alarm_status.
ALTER TABLE xjob_log ADD COLUMN alarm_delivery TEXT NOT NULL DEFAULT '';
