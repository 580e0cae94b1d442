-- xjob schema, MySQL 8 / MariaDB 10.6+. All times are epoch milliseconds on the admin clock
-- (BIGINT). Same tables, columns and index names as the SQLite schema.
-- Enum columns hold XXL-JOB's names (CRON, FIRST, SERIAL_EXECUTION, PENDING, ...).
--
-- InnoDB, utf8mb4 with a binary collation: names compare and filter case-sensitively, as on
-- SQLite. Free text is TEXT/MEDIUMTEXT without a default (MySQL before 8.0.13 refuses TEXT
-- defaults): the store always writes those columns explicitly. Indexed strings are VARCHARs
-- short enough for an index (191 characters × 4 bytes fits the 767-byte limit of old formats).
-- No column name here is a reserved word in MySQL 8 or MariaDB, so none needs backquotes.

CREATE TABLE xjob_group (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    app_name      VARCHAR(191) NOT NULL,
    title         TEXT         NOT NULL,
    address_type  VARCHAR(16)  NOT NULL,
    addresses     TEXT         NOT NULL,
    access_token  VARCHAR(256) NOT NULL DEFAULT '',
    updated_ms    BIGINT       NOT NULL,
    UNIQUE KEY ux_group_app_name (app_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Live executors: one row per session, owned by the admin node holding the stream.
CREATE TABLE xjob_registry (
    executor_id    VARCHAR(191) NOT NULL PRIMARY KEY,
    app_name       VARCHAR(191) NOT NULL,
    address        VARCHAR(255) NOT NULL,
    handlers       TEXT         NOT NULL,
    owner_node     VARCHAR(191) NOT NULL,
    registered_ms  BIGINT       NOT NULL,
    heartbeat_ms   BIGINT       NOT NULL,
    KEY ix_registry_app (app_name, address)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE xjob_job (
    id                      BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    group_id                BIGINT       NOT NULL,
    name                    TEXT         NOT NULL,
    author                  TEXT         NOT NULL,
    alarm_email             TEXT         NOT NULL,
    schedule_type           VARCHAR(32)  NOT NULL,
    schedule_conf           TEXT         NOT NULL,
    time_zone               VARCHAR(64)  NOT NULL DEFAULT '',
    misfire_strategy        VARCHAR(32)  NOT NULL,
    route_strategy          VARCHAR(32)  NOT NULL,
    handler                 TEXT         NOT NULL,
    params                  MEDIUMTEXT   NOT NULL,
    block_strategy          VARCHAR(32)  NOT NULL,
    timeout_ms              BIGINT       NOT NULL DEFAULT 0,
    fail_retry_count        INT          NOT NULL DEFAULT 0,
    retry_initial_delay_ms  BIGINT       NOT NULL DEFAULT 0,
    retry_factor            DOUBLE       NOT NULL DEFAULT 1.0,
    retry_max_delay_ms      BIGINT       NOT NULL DEFAULT 0,
    glue_type               VARCHAR(32)  NOT NULL,
    glue_source             MEDIUMTEXT   NOT NULL,
    glue_remark             TEXT         NOT NULL,
    glue_updated_ms         BIGINT       NOT NULL DEFAULT 0,
    child_job_ids           TEXT         NOT NULL,
    trigger_status          INT          NOT NULL DEFAULT 0,
    trigger_last_ms         BIGINT       NOT NULL DEFAULT 0,
    trigger_next_ms         BIGINT       NOT NULL DEFAULT 0,
    created_ms              BIGINT       NOT NULL,
    updated_ms              BIGINT       NOT NULL,
    KEY ix_job_trigger (trigger_status, trigger_next_ms),
    KEY ix_job_group (group_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per run attempt and shard. fire_key makes a scheduled fire impossible to create twice
-- (NULL for manual runs; a UNIQUE index allows any number of NULLs).
CREATE TABLE xjob_log (
    id                BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id            BIGINT       NOT NULL,
    group_id          BIGINT       NOT NULL,
    fire_key          VARCHAR(191) NULL,
    status            VARCHAR(16)  NOT NULL,
    trigger_type      VARCHAR(16)  NOT NULL,
    scheduled_at_ms   BIGINT       NOT NULL DEFAULT 0,
    trigger_time_ms   BIGINT       NOT NULL DEFAULT 0,
    trigger_code      INT          NOT NULL DEFAULT 0,
    trigger_msg       MEDIUMTEXT   NOT NULL,
    handle_time_ms    BIGINT       NOT NULL DEFAULT 0,
    handle_code       INT          NOT NULL DEFAULT 0,
    handle_msg        MEDIUMTEXT   NOT NULL,
    executor_address  TEXT         NOT NULL,
    handler           TEXT         NOT NULL,
    params            MEDIUMTEXT   NOT NULL,
    shard_index       INT          NOT NULL DEFAULT 0,
    shard_total       INT          NOT NULL DEFAULT 1,
    attempt           INT          NOT NULL DEFAULT 0,
    retry_left        INT          NOT NULL DEFAULT 0,
    owner_node        VARCHAR(191) NOT NULL DEFAULT '',
    epoch             BIGINT       NOT NULL DEFAULT 0,
    trace_id          VARCHAR(64)  NOT NULL DEFAULT '',
    alarm_status      INT          NOT NULL DEFAULT 0,
    UNIQUE KEY ux_log_fire_key (fire_key),
    KEY ix_log_job (job_id, id),
    KEY ix_log_trigger_time (trigger_time_ms),
    KEY ix_log_status (status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE xjob_log_report (
    day_ms      BIGINT NOT NULL PRIMARY KEY,
    running     BIGINT NOT NULL DEFAULT 0,
    success     BIGINT NOT NULL DEFAULT 0,
    failed      BIGINT NOT NULL DEFAULT 0,
    updated_ms  BIGINT NOT NULL DEFAULT 0
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The row every schedule round locks with SELECT … FOR UPDATE.
CREATE TABLE xjob_lock (
    lock_name VARCHAR(64) NOT NULL PRIMARY KEY
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO xjob_lock (lock_name) VALUES ('schedule_lock');

-- Admin nodes: the epoch grows on every start; the lease tells others when to adopt its fires.
CREATE TABLE xjob_node (
    node_id         VARCHAR(191) NOT NULL PRIMARY KEY,
    epoch           BIGINT       NOT NULL,
    lease_until_ms  BIGINT       NOT NULL,
    started_ms      BIGINT       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE xjob_glue (
    id           BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id       BIGINT      NOT NULL,
    glue_type    VARCHAR(32) NOT NULL,
    glue_source  MEDIUMTEXT  NOT NULL,
    glue_remark  TEXT        NOT NULL,
    created_ms   BIGINT      NOT NULL,
    KEY ix_glue_job (job_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE xjob_user (
    id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    username       VARCHAR(191) NOT NULL,
    password_hash  VARCHAR(255) NOT NULL,
    role           INT          NOT NULL DEFAULT 0,
    permission     TEXT         NOT NULL,
    UNIQUE KEY ux_user_username (username)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
