DROP INDEX jobs_upstream_key;
ALTER TABLE jobs DROP COLUMN upstream_key;
