-- How the admin talks to a registered executor: 'grpc' (a Registry.Session) or 'xxl-job-http'
-- (an unmodified XXL-JOB executor registered through xxl_job_compat_listen), so every admin of a
-- cluster routes to XXL-JOB executors held by another admin over the right protocol.
ALTER TABLE xjob_registry ADD COLUMN protocol VARCHAR(32) NOT NULL DEFAULT 'grpc';
