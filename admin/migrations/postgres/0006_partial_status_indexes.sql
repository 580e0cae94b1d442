-- A change of status rewrites a log row outside HOT, so it adds an entry to every index of the
-- table; (alarm_status, status) and (status, dispatch_at_ms) held every row, and each run's three
-- status changes paid for both. The lookups they served read small sets only, now each held by
-- its own partial index (see 0005 for the follow-up-due and running sets): PENDING rows to
-- adopt, delayed PENDING rows whose time comes, and follow-ups a node claimed.
DROP INDEX ix_log_followup;
DROP INDEX ix_log_dispatch_at;
CREATE INDEX ix_log_pending ON xjob_log (owner_node, epoch) WHERE status = 'PENDING';
CREATE INDEX ix_log_delayed ON xjob_log (owner_node, epoch, dispatch_at_ms)
    WHERE status = 'PENDING' AND dispatch_at_ms > 0;
CREATE INDEX ix_log_followup_claimed ON xjob_log (owner_node, epoch) WHERE alarm_status = -1;
-- Room on each page for the dispatch outcome's update (trigger code, message, address; no
-- indexed column) to stay on the page as a HOT update, without new index entries.
ALTER TABLE xjob_log SET (fillfactor = 85);
