DROP INDEX jobs_provider_id;
DROP INDEX jobs_model_id;
DROP INDEX jobs_state_id;
ALTER TABLE jobs DROP COLUMN request;
