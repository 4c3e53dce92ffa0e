DROP INDEX jobs_created_at;
CREATE INDEX jobs_created_at ON jobs (created_at);
DROP INDEX jobs_user_id_created_at;
CREATE INDEX jobs_user_id_created_at ON jobs (user_id, created_at);
DROP INDEX jobs_finished_at;
DROP TABLE usage_rollup;
ALTER TABLE ledger ADD CONSTRAINT ledger_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id);
