-- JobAdmin users, API tokens (stored as SHA-256 hashes), per-group grants and the audit trail.

-- 0001 created a placeholder `xjob_user` (XXL-JOB's shape) that nothing ever wrote to; it is
-- replaced by the table users are really stored in.
DROP TABLE IF EXISTS xjob_user;

CREATE TABLE xjob_user (
    id             BIGSERIAL PRIMARY KEY,
    name           TEXT      NOT NULL UNIQUE,
    role           TEXT      NOT NULL,
    -- argon2id PHC string for the web console; empty = no password login.
    password_hash  TEXT      NOT NULL DEFAULT '',
    created_ms     BIGINT    NOT NULL
);

CREATE TABLE xjob_token (
    id           BIGSERIAL PRIMARY KEY,
    user_id      BIGINT    NOT NULL,
    -- Hex SHA-256 of the token: tokens are 256-bit random, so a fast hash is enough.
    token_hash   TEXT      NOT NULL UNIQUE,
    prefix       TEXT      NOT NULL,
    description  TEXT      NOT NULL DEFAULT '',
    expires_ms   BIGINT    NOT NULL DEFAULT 0,
    revoked_ms   BIGINT    NOT NULL DEFAULT 0,
    created_ms   BIGINT    NOT NULL
);
CREATE INDEX ix_token_user ON xjob_token (user_id);

CREATE TABLE xjob_user_group (
    user_id   BIGINT NOT NULL,
    group_id  BIGINT NOT NULL,
    PRIMARY KEY (user_id, group_id)
);

CREATE TABLE xjob_audit (
    id         BIGSERIAL PRIMARY KEY,
    at_ms      BIGINT    NOT NULL,
    actor      TEXT      NOT NULL,
    call_name  TEXT      NOT NULL,
    object     TEXT      NOT NULL DEFAULT '',
    summary    TEXT      NOT NULL DEFAULT ''
);
CREATE INDEX ix_audit_at ON xjob_audit (at_ms);
