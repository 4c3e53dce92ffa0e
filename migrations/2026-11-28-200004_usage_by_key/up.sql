-- Usage groups by key: the rollup keeps which key submitted the jobs it counts ('' for jobs of
-- no recorded key, and for rows rolled up before keys were recorded).
ALTER TABLE usage_rollup ADD COLUMN key_prefix text NOT NULL DEFAULT '';
ALTER TABLE usage_rollup ALTER COLUMN key_prefix DROP DEFAULT;
ALTER TABLE usage_rollup DROP CONSTRAINT usage_rollup_pkey;
ALTER TABLE usage_rollup ADD PRIMARY KEY (day, user_id, model, provider, key_prefix);
