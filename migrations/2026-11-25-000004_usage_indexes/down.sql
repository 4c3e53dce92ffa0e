CREATE INDEX ledger_user_id ON ledger (user_id);
DROP INDEX ledger_user_id_id;
DROP INDEX jobs_created_at;
DROP INDEX jobs_user_id_created_at;
