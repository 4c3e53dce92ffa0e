-- The rollup's rows per provider key again; what the per-key rollup told apart is lost, so the
-- rows read as of no known provider key.
ALTER TABLE usage_rollup DROP CONSTRAINT usage_rollup_pkey;
ALTER TABLE usage_rollup ADD COLUMN provider_key text NOT NULL DEFAULT '';
ALTER TABLE usage_rollup ALTER COLUMN provider_key DROP DEFAULT;
ALTER TABLE usage_rollup ADD PRIMARY KEY (day, user_id, model, provider, key_prefix, provider_key);
DROP TABLE usage_key_rollup;
