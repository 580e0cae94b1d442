-- Fewer index writes per run. The claim and the result change `status`, which the partial
-- indexes name, so each writes a new version of the run's row outside HOT, and so does the
-- dispatch outcome when the row's page has no room left; every such version adds an entry to
-- each B-tree of the table. The trigger-time B-tree paid for one on every write of every fire,
-- although a run's trigger time is only read by ranges of days (the dashboard's counts) or
-- next to other conditions. Rows are written in trigger-time order, so a block-range (BRIN)
-- index answers those ranges from one summary per 128 pages, and a new row version lands in a
-- range already summarized wide enough, or not summarized yet, at no index write. Rows not
-- triggered yet (0) are left out, so a range's minimum stays a real time; the day counts state
-- `trigger_time_ms > 0` as well, which a prepared statement's plan needs to use this index.
DROP INDEX ix_log_trigger_time;
CREATE INDEX ix_log_trigger_time ON xjob_log USING brin (trigger_time_ms)
    WITH (autosummarize = on) WHERE trigger_time_ms > 0;
-- Half of each page left free by inserts (85 % full before): the claim's new version and the
-- dispatch outcome's then more often fit on the row's own page, where the outcome's update
-- (no indexed column) is HOT. Measured at W1 the table came out smaller, not larger: row
-- versions pruned on their own page make room there for the next ones.
ALTER TABLE xjob_log SET (fillfactor = 50);
