-- Overlap control between a workflow's scheduled runs (docs/scheduling.md, "Workflow
-- schedules"): what an occurrence does while an earlier scheduled run is still RUNNING. Existing
-- workflows keep today's behaviour (ALLOW_ALL). The claim that writes an occurrence's run reads
-- the running ones and decides in its own transaction, so every admin decides once, the same.
ALTER TABLE xjob_workflow ADD COLUMN overlap_policy VARCHAR(16) NOT NULL DEFAULT 'ALLOW_ALL';

-- Why a run was SKIPPED (the run still going) or CANCELLED by a later occurrence.
ALTER TABLE xjob_workflow_run ADD COLUMN reason VARCHAR(512) NOT NULL DEFAULT '';
