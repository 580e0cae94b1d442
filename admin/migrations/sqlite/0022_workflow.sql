-- Workflows (docs/scheduling.md, "Workflows"): a named graph of jobs. The graph (nodes with
-- their job and fan-in, edges with their condition) is one JSON document, checked whole at
-- save (acyclic, keys unique, edges between known nodes) and read whole by every use.
CREATE TABLE xjob_workflow (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id    INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    graph       TEXT    NOT NULL,
    updated_ms  INTEGER NOT NULL
);
CREATE INDEX ix_workflow_group ON xjob_workflow (group_id);

-- One run of a workflow. The graph is copied in at the start, so editing the workflow does
-- not change the runs under way.
CREATE TABLE xjob_workflow_run (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_id  INTEGER NOT NULL,
    group_id     INTEGER NOT NULL,
    status       TEXT NOT NULL,
    params       TEXT NOT NULL,
    graph        TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    finished_ms  INTEGER NOT NULL DEFAULT 0
);

-- A node of a run, once it started or was skipped (no row: waiting). The key (run, node) is
-- what starts a node exactly once: two admins, or a follow-up redone after a crash, cannot
-- both insert it. log_id is the node's current run (its retry after a failed attempt).
CREATE TABLE xjob_workflow_node (
    run_id      INTEGER NOT NULL,
    node_key    TEXT NOT NULL,
    state       TEXT NOT NULL,
    log_id      INTEGER NOT NULL DEFAULT 0,
    updated_ms  INTEGER NOT NULL,
    PRIMARY KEY (run_id, node_key)
);
CREATE INDEX ix_workflow_run_workflow ON xjob_workflow_run (workflow_id);
CREATE INDEX ix_workflow_node_log ON xjob_workflow_node (log_id);
