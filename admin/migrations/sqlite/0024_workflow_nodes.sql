-- A user's hand on a workflow run's nodes (docs/scheduling.md, "Retry or skip a node"), and
-- the run's trace. generation is bumped by every retry or skip: an advance that read an
-- older one writes nothing, as it decided on states that changed under it. traceparent names
-- the run's span, under which every node's run is traced. skipped_by names the user who
-- skipped a node (state SKIPPED_BY_USER).
ALTER TABLE xjob_workflow_run ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE xjob_workflow_run ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';
ALTER TABLE xjob_workflow_node ADD COLUMN skipped_by TEXT NOT NULL DEFAULT '';
