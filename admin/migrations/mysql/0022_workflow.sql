-- Workflows (docs/scheduling.md, "Workflows"): a named graph of jobs. The graph (nodes with
-- their job and fan-in, edges with their condition) is one JSON document, checked whole at
-- save (acyclic, keys unique, edges between known nodes) and read whole by every use.
CREATE TABLE xjob_workflow (
    id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    group_id    BIGINT NOT NULL,
    name        VARCHAR(255) NOT NULL,
    graph       MEDIUMTEXT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    KEY ix_workflow_group (group_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One run of a workflow. The graph is copied in at the start, so editing the workflow does
-- not change the runs under way.
CREATE TABLE xjob_workflow_run (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    workflow_id  BIGINT NOT NULL,
    group_id     BIGINT NOT NULL,
    status       VARCHAR(16) NOT NULL,
    params       MEDIUMTEXT NOT NULL,
    graph        MEDIUMTEXT NOT NULL,
    created_ms   BIGINT NOT NULL,
    finished_ms  BIGINT NOT NULL DEFAULT 0,
    KEY ix_workflow_run_workflow (workflow_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A node of a run, once it started or was skipped (no row: waiting). The key (run, node) is
-- what starts a node exactly once: two admins, or a follow-up redone after a crash, cannot
-- both insert it. log_id is the node's current run (its retry after a failed attempt).
CREATE TABLE xjob_workflow_node (
    run_id      BIGINT NOT NULL,
    node_key    VARCHAR(64) NOT NULL,
    state       VARCHAR(16) NOT NULL,
    log_id      BIGINT NOT NULL DEFAULT 0,
    updated_ms  BIGINT NOT NULL,
    PRIMARY KEY (run_id, node_key),
    KEY ix_workflow_node_log (log_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
