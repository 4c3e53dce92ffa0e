-- The key a job was submitted with (its prefix), so that a key's budget, concurrency limit and
-- usage can be counted from its jobs. Jobs accepted before keys had settings have none.
ALTER TABLE jobs ADD COLUMN key_prefix text;
-- A key's budget counts its jobs of the current period: this finds them without a scan.
CREATE INDEX jobs_key_prefix_created_at ON jobs (key_prefix, created_at) WHERE key_prefix IS NOT NULL;
