-- Workflow schedules (docs/scheduling.md, "Workflow schedules"): a workflow may start on its
-- own, on a CRON or FIX_RATE schedule in its zone, with default params for its runs.
-- next_fire_ms is the next occurrence to start (0: none); an admin that starts it moves it on
-- in the same transaction that writes the run.
ALTER TABLE xjob_workflow ADD COLUMN schedule_type VARCHAR(16) NOT NULL DEFAULT 'NONE';
ALTER TABLE xjob_workflow ADD COLUMN schedule_conf VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE xjob_workflow ADD COLUMN time_zone VARCHAR(64) NOT NULL DEFAULT '';
ALTER TABLE xjob_workflow ADD COLUMN misfire_strategy VARCHAR(16) NOT NULL DEFAULT 'DO_NOTHING';
ALTER TABLE xjob_workflow ADD COLUMN params MEDIUMTEXT NULL;
ALTER TABLE xjob_workflow ADD COLUMN next_fire_ms BIGINT NOT NULL DEFAULT 0;
CREATE INDEX ix_workflow_next_fire ON xjob_workflow (next_fire_ms);

-- Why a run started (MANUAL, CRON, MISFIRE) and, for a scheduled one, the occurrence it stands
-- for. The unique key (workflow, occurrence) is what starts each occurrence at most once, across
-- admins and crashes; a StartWorkflow run has no occurrence (NULL), and NULLs never collide.
ALTER TABLE xjob_workflow_run ADD COLUMN trigger_type VARCHAR(16) NOT NULL DEFAULT 'MANUAL';
ALTER TABLE xjob_workflow_run ADD COLUMN scheduled_at_ms BIGINT NULL;
CREATE UNIQUE INDEX ux_workflow_run_occurrence ON xjob_workflow_run (workflow_id, scheduled_at_ms);
