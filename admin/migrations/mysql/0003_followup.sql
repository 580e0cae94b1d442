-- Follow-up of finished runs: the once-only claim of a broadcast fire's child jobs.

-- 1 once the child jobs of a SHARDING_BROADCAST fire were triggered (set by compare-and-set on
-- the fire's first successful shard-0 row, so shards finishing together trigger them once).
ALTER TABLE xjob_log ADD COLUMN children_claimed BOOLEAN NOT NULL DEFAULT FALSE;
