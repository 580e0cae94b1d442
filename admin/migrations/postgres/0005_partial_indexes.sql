-- The follow-up claim and the lost-run monitor ask for the oldest few rows of a small set
-- (finished runs not yet followed up; running runs) `ORDER BY id LIMIT n`. While the table grows,
-- the planner's statistics lag and it may walk the primary key from the first row instead,
-- which costs a scan of the whole log table every 200 ms. These indexes hold only the rows of
-- those sets, in id order, so the cheap plan is also the obvious one.
CREATE INDEX ix_log_followup_due ON xjob_log (id)
    WHERE alarm_status = 0 AND status IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'KILLED', 'LOST', 'SKIPPED');
CREATE INDEX ix_log_running ON xjob_log (id) WHERE status = 'RUNNING';
