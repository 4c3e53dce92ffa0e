-- Usage reports count jobs by the UTC day they were created, for one user or for everyone: each
-- reads an index range instead of scanning the jobs table.
CREATE INDEX jobs_user_id_created_at ON jobs (user_id, created_at);
CREATE INDEX jobs_created_at ON jobs (created_at);
-- The ledger is read a user at a time, newest first, page by page; this index replaces the one
-- on user_id alone.
CREATE INDEX ledger_user_id_id ON ledger (user_id, id DESC);
DROP INDEX ledger_user_id;
