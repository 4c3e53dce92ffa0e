-- Retention removes final jobs past GENJOBS_JOB_RETENTION_DAYS. Their ledger rows stay and keep
-- the job's id, so the ledger no longer points at the jobs table.
ALTER TABLE ledger DROP CONSTRAINT ledger_job_id_fkey;

-- What usage reports counted of removed jobs, by the UTC day they were created, user and model:
-- reports add these rows to the live jobs, so they read the same before and after a purge.
CREATE TABLE usage_rollup (
    day date NOT NULL,
    user_id uuid NOT NULL REFERENCES users (id),
    model text NOT NULL,
    jobs bigint NOT NULL,
    succeeded bigint NOT NULL,
    failed bigint NOT NULL,
    canceled bigint NOT NULL,
    credits_spent bigint NOT NULL,
    PRIMARY KEY (day, user_id, model)
);
CREATE INDEX usage_rollup_user_id_day ON usage_rollup (user_id, day);

-- The purge finds the oldest final jobs without scanning the table.
CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- Usage reports read only these columns of the jobs in their range: covering indexes answer them
-- from the index alone (an index-only scan), without a heap page per job.
DROP INDEX jobs_user_id_created_at;
CREATE INDEX jobs_user_id_created_at ON jobs (user_id, created_at) INCLUDE (model, state, credits_actual);
DROP INDEX jobs_created_at;
CREATE INDEX jobs_created_at ON jobs (created_at) INCLUDE (user_id, model, state, credits_actual);
