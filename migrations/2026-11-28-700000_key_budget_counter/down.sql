ALTER TABLE jobs DROP COLUMN budget_period_start;
ALTER TABLE api_keys DROP COLUMN budget_period_start, DROP COLUMN budget_used;
