-- Partitioned scheduling (docs/architecture.md): the servers split the jobs in 256 partitions
-- by job_id mod 256, each owned by one admin's (node, epoch). SQLite keeps one scanning admin
-- (its file's write lock serializes the rounds), so the table is created for a uniform schema
-- but never used.
CREATE TABLE xjob_partition (
    part_no     INTEGER NOT NULL PRIMARY KEY,
    owner_node  TEXT,
    owner_epoch INTEGER NOT NULL DEFAULT 0
);

-- When each admin last rebalanced its partitions: the share counts the admins marked within a
-- few rounds. An admin of an older release never marks itself; the liveness watch clears the
-- mark of an admin it finds dead.
ALTER TABLE xjob_node ADD COLUMN partitions_seen_ms BIGINT NOT NULL DEFAULT 0;
