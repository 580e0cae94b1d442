-- xjob schema, PostgreSQL 15+. All times are epoch milliseconds (BIGINT) on the admin clock.
-- Same tables, columns and index names as the SQLite schema; enum columns hold XXL-JOB's names
-- (CRON, FIRST, SERIAL_EXECUTION, PENDING, ...). Counters that map to Rust i32 are INTEGER.

CREATE TABLE xjob_group (
    id            BIGSERIAL PRIMARY KEY,
    app_name      TEXT      NOT NULL UNIQUE,
    title         TEXT      NOT NULL,
    address_type  TEXT      NOT NULL,
    addresses     TEXT      NOT NULL DEFAULT '',
    access_token  TEXT      NOT NULL DEFAULT '',
    updated_ms    BIGINT    NOT NULL
);

-- Live executors: one row per session, owned by the admin node holding the stream.
CREATE TABLE xjob_registry (
    executor_id    TEXT    PRIMARY KEY,
    app_name       TEXT    NOT NULL,
    address        TEXT    NOT NULL,
    handlers       TEXT    NOT NULL DEFAULT '',
    owner_node     TEXT    NOT NULL,
    registered_ms  BIGINT  NOT NULL,
    heartbeat_ms   BIGINT  NOT NULL
);
CREATE INDEX ix_registry_app ON xjob_registry (app_name, address);

CREATE TABLE xjob_job (
    id                      BIGSERIAL        PRIMARY KEY,
    group_id                BIGINT           NOT NULL,
    name                    TEXT             NOT NULL,
    author                  TEXT             NOT NULL DEFAULT '',
    alarm_email             TEXT             NOT NULL DEFAULT '',
    schedule_type           TEXT             NOT NULL,
    schedule_conf           TEXT             NOT NULL DEFAULT '',
    time_zone               TEXT             NOT NULL DEFAULT '',
    misfire_strategy        TEXT             NOT NULL,
    route_strategy          TEXT             NOT NULL,
    handler                 TEXT             NOT NULL DEFAULT '',
    params                  TEXT             NOT NULL DEFAULT '',
    block_strategy          TEXT             NOT NULL,
    timeout_ms              BIGINT           NOT NULL DEFAULT 0,
    fail_retry_count        INTEGER          NOT NULL DEFAULT 0,
    retry_initial_delay_ms  BIGINT           NOT NULL DEFAULT 0,
    retry_factor            DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    retry_max_delay_ms      BIGINT           NOT NULL DEFAULT 0,
    glue_type               TEXT             NOT NULL,
    glue_source             TEXT             NOT NULL DEFAULT '',
    glue_remark             TEXT             NOT NULL DEFAULT '',
    glue_updated_ms         BIGINT           NOT NULL DEFAULT 0,
    child_job_ids           TEXT             NOT NULL DEFAULT '',
    trigger_status          INTEGER          NOT NULL DEFAULT 0,
    trigger_last_ms         BIGINT           NOT NULL DEFAULT 0,
    trigger_next_ms         BIGINT           NOT NULL DEFAULT 0,
    created_ms              BIGINT           NOT NULL,
    updated_ms              BIGINT           NOT NULL
);
CREATE INDEX ix_job_trigger ON xjob_job (trigger_status, trigger_next_ms);
CREATE INDEX ix_job_group ON xjob_job (group_id);

-- One row per run attempt and shard. fire_key makes a scheduled fire impossible to create twice
-- (NULL for manual triggers: a UNIQUE index allows any number of NULLs).
CREATE TABLE xjob_log (
    id                BIGSERIAL PRIMARY KEY,
    job_id            BIGINT    NOT NULL,
    group_id          BIGINT    NOT NULL,
    fire_key          TEXT,
    status            TEXT      NOT NULL,
    trigger_type      TEXT      NOT NULL,
    scheduled_at_ms   BIGINT    NOT NULL DEFAULT 0,
    trigger_time_ms   BIGINT    NOT NULL DEFAULT 0,
    trigger_code      INTEGER   NOT NULL DEFAULT 0,
    trigger_msg       TEXT      NOT NULL DEFAULT '',
    handle_time_ms    BIGINT    NOT NULL DEFAULT 0,
    handle_code       INTEGER   NOT NULL DEFAULT 0,
    handle_msg        TEXT      NOT NULL DEFAULT '',
    executor_address  TEXT      NOT NULL DEFAULT '',
    handler           TEXT      NOT NULL DEFAULT '',
    params            TEXT      NOT NULL DEFAULT '',
    shard_index       INTEGER   NOT NULL DEFAULT 0,
    shard_total       INTEGER   NOT NULL DEFAULT 1,
    attempt           INTEGER   NOT NULL DEFAULT 0,
    retry_left        INTEGER   NOT NULL DEFAULT 0,
    owner_node        TEXT      NOT NULL DEFAULT '',
    epoch             BIGINT    NOT NULL DEFAULT 0,
    trace_id          TEXT      NOT NULL DEFAULT '',
    alarm_status      INTEGER   NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX ux_log_fire_key ON xjob_log (fire_key);
CREATE INDEX ix_log_job ON xjob_log (job_id, id);
CREATE INDEX ix_log_trigger_time ON xjob_log (trigger_time_ms);
CREATE INDEX ix_log_status ON xjob_log (status);

CREATE TABLE xjob_log_report (
    day_ms      BIGINT PRIMARY KEY,
    running     BIGINT NOT NULL DEFAULT 0,
    success     BIGINT NOT NULL DEFAULT 0,
    failed      BIGINT NOT NULL DEFAULT 0,
    updated_ms  BIGINT NOT NULL DEFAULT 0
);

-- The row every schedule round locks with SELECT … FOR UPDATE. An admin refuses to start
-- without it.
CREATE TABLE xjob_lock (
    lock_name TEXT PRIMARY KEY
);
INSERT INTO xjob_lock (lock_name) VALUES ('schedule_lock');

-- Admin nodes: the epoch grows on every start; the lease tells others when to adopt its fires.
CREATE TABLE xjob_node (
    node_id         TEXT    PRIMARY KEY,
    epoch           BIGINT  NOT NULL,
    lease_until_ms  BIGINT  NOT NULL,
    started_ms      BIGINT  NOT NULL
);

CREATE TABLE xjob_glue (
    id           BIGSERIAL PRIMARY KEY,
    job_id       BIGINT    NOT NULL,
    glue_type    TEXT      NOT NULL,
    glue_source  TEXT      NOT NULL,
    glue_remark  TEXT      NOT NULL,
    created_ms   BIGINT    NOT NULL
);
CREATE INDEX ix_glue_job ON xjob_glue (job_id, id);

CREATE TABLE xjob_user (
    id             BIGSERIAL PRIMARY KEY,
    username       TEXT      NOT NULL UNIQUE,
    password_hash  TEXT      NOT NULL,
    role           INTEGER   NOT NULL DEFAULT 0,
    permission     TEXT      NOT NULL DEFAULT ''
);
