-- JobAdmin users, API tokens (stored as SHA-256 hashes), per-group grants and the audit trail.

-- 0001 created a placeholder `xjob_user` (XXL-JOB's shape) that nothing ever wrote to; it is
-- replaced by the table users are really stored in.
DROP TABLE IF EXISTS xjob_user;

CREATE TABLE xjob_user (
    id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name           VARCHAR(191) NOT NULL,
    role           VARCHAR(16)  NOT NULL,
    -- argon2id PHC string for the web console; empty = no password login.
    password_hash  VARCHAR(255) NOT NULL DEFAULT '',
    created_ms     BIGINT       NOT NULL,
    UNIQUE KEY ux_user_name (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE xjob_token (
    id           BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id      BIGINT       NOT NULL,
    -- Hex SHA-256 of the token: tokens are 256-bit random, so a fast hash is enough.
    token_hash   VARCHAR(64)  NOT NULL,
    prefix       VARCHAR(32)  NOT NULL,
    description  VARCHAR(255) NOT NULL DEFAULT '',
    expires_ms   BIGINT       NOT NULL DEFAULT 0,
    revoked_ms   BIGINT       NOT NULL DEFAULT 0,
    created_ms   BIGINT       NOT NULL,
    UNIQUE KEY ux_token_hash (token_hash),
    KEY ix_token_user (user_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE xjob_user_group (
    user_id   BIGINT NOT NULL,
    group_id  BIGINT NOT NULL,
    PRIMARY KEY (user_id, group_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE xjob_audit (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at_ms      BIGINT       NOT NULL,
    actor      VARCHAR(191) NOT NULL,
    call_name  VARCHAR(64)  NOT NULL,
    object     VARCHAR(191) NOT NULL DEFAULT '',
    summary    TEXT         NOT NULL,
    KEY ix_audit_at (at_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
