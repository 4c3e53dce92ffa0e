-- A user's price tier: jobs cost the catalog's price times this percent, rounded up per job.
ALTER TABLE users ADD COLUMN price_percent integer NOT NULL DEFAULT 100 CHECK (price_percent BETWEEN 1 AND 1000);
-- The tier a job was accepted at, so that its charge follows the same tier as its hold.
ALTER TABLE jobs ADD COLUMN rate_percent integer NOT NULL DEFAULT 100 CHECK (rate_percent BETWEEN 1 AND 1000);
-- The operators' listing of users, newest first, finds names by their beginning.
CREATE INDEX users_name_pattern ON users (name text_pattern_ops);
