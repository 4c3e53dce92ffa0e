-- What one key may do; every column null means no restriction of the key's own.
ALTER TABLE api_keys
    ADD COLUMN name text,
    ADD COLUMN models text[],
    ADD COLUMN budget_credits bigint CHECK (budget_credits >= 0),
    ADD COLUMN budget_period text CHECK (budget_period IN ('day', 'week', 'month', 'total')),
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN rate_limit_per_minute integer CHECK (rate_limit_per_minute > 0),
    ADD COLUMN max_concurrent_jobs integer CHECK (max_concurrent_jobs > 0),
    ADD CONSTRAINT api_keys_budget_is_whole CHECK ((budget_credits IS NULL) = (budget_period IS NULL));
