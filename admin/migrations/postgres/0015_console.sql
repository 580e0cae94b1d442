-- Web console sessions (docs/console.md). The cookie holds a random session id; only its
-- SHA-256 is stored, so a database dump does not let anyone log in. user_id 0 is the session of
-- an open console (no users yet, loopback): it exists only to carry the CSRF token.
CREATE TABLE xjob_console_session (
    id            BIGSERIAL PRIMARY KEY,
    token_hash    TEXT    NOT NULL UNIQUE,
    user_id       BIGINT  NOT NULL,
    -- Random per session; every form posts it back (CSRF).
    csrf_token    TEXT    NOT NULL,
    created_ms    BIGINT  NOT NULL,
    expires_ms    BIGINT  NOT NULL
);
CREATE INDEX ix_console_session_expires ON xjob_console_session (expires_ms);

-- The dashboard's per-day counts of lost and skipped runs, and how late scheduled fires were
-- sent (first attempts of CRON/MISFIRE fires): how many more than 1 s late, and the latest.
ALTER TABLE xjob_log_report
    ADD COLUMN lost BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN skipped BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN late_fires BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN max_lateness_ms BIGINT NOT NULL DEFAULT 0;
