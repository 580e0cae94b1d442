-- Calendars: named sets of dates and times (one rule per line of `rules`) that jobs skip or
-- run only in (docs/scheduling.md). A job without a calendar runs every occurrence, as before.
CREATE TABLE xjob_calendar (
    name         TEXT    PRIMARY KEY,
    time_zone    TEXT    NOT NULL DEFAULT '',
    rules        TEXT    NOT NULL DEFAULT '',
    description  TEXT    NOT NULL DEFAULT '',
    created_ms   BIGINT  NOT NULL,
    updated_ms   BIGINT  NOT NULL
);
ALTER TABLE xjob_job ADD COLUMN calendar TEXT NOT NULL DEFAULT '';
ALTER TABLE xjob_job ADD COLUMN calendar_mode VARCHAR(16) NOT NULL DEFAULT 'SKIP';
