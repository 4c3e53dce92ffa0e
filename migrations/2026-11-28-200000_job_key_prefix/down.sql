DROP INDEX jobs_key_prefix_created_at;
ALTER TABLE jobs DROP COLUMN key_prefix;
