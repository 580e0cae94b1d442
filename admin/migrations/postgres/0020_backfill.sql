-- Backfills: a job's schedule occurrences in a range, run now in order (docs/scheduling.md).
-- The owner (node, epoch) fences the runner like a claim; cursor_ms is the last occurrence
-- whose run was created, written in the same transaction as that run.
CREATE TABLE xjob_backfill (
    id              BIGSERIAL PRIMARY KEY,
    job_id          BIGINT  NOT NULL,
    from_ms         BIGINT  NOT NULL,
    to_ms           BIGINT  NOT NULL,
    max_concurrent  BIGINT  NOT NULL,
    state           TEXT    NOT NULL,
    total           BIGINT  NOT NULL,
    created         BIGINT  NOT NULL DEFAULT 0,
    cursor_ms       BIGINT  NOT NULL DEFAULT 0,
    owner_node      TEXT    NOT NULL DEFAULT '',
    epoch           BIGINT  NOT NULL DEFAULT 0,
    created_by      TEXT    NOT NULL DEFAULT '',
    created_ms      BIGINT  NOT NULL,
    updated_ms      BIGINT  NOT NULL
);
CREATE INDEX ix_backfill_job ON xjob_backfill (job_id, id);
CREATE INDEX ix_backfill_state ON xjob_backfill (state);
-- One run per (backfill, occurrence): the primary key makes a duplicate impossible.
CREATE TABLE xjob_backfill_run (
    backfill_id      BIGINT  NOT NULL,
    scheduled_at_ms  BIGINT  NOT NULL,
    log_id           BIGINT  NOT NULL,
    PRIMARY KEY (backfill_id, scheduled_at_ms)
);
