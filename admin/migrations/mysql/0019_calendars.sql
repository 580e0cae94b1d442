-- Calendars: named sets of dates and times (one rule per line of `rules`) that jobs skip or
-- run only in (docs/scheduling.md). A job without a calendar runs every occurrence, as before.
CREATE TABLE xjob_calendar (
    name         VARCHAR(64)  NOT NULL PRIMARY KEY,
    time_zone    VARCHAR(64)  NOT NULL DEFAULT '',
    rules        TEXT         NOT NULL,
    description  VARCHAR(1024) NOT NULL DEFAULT '',
    created_ms   BIGINT       NOT NULL,
    updated_ms   BIGINT       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
ALTER TABLE xjob_job ADD COLUMN calendar VARCHAR(64) NOT NULL DEFAULT '';
ALTER TABLE xjob_job ADD COLUMN calendar_mode VARCHAR(16) NOT NULL DEFAULT 'SKIP';
