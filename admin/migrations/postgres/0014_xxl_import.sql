-- What `xjob import-xxl-job` imported: one row per XXL-JOB job, keyed by the XXL-JOB database
-- it came from (`host:port/database`, no credentials) and its id there. A second import of the
-- same database finds its jobs here and creates nothing new.
CREATE TABLE xjob_xxl_import (
    source       TEXT   NOT NULL,
    xxl_job_id   BIGINT NOT NULL,
    job_id       BIGINT NOT NULL,
    imported_ms  BIGINT NOT NULL,
    PRIMARY KEY (source, xxl_job_id)
);
