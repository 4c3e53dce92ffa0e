-- Folds the rollup's rows per provider key back together before the column goes.
CREATE TEMPORARY TABLE folded AS
SELECT day, user_id, model, provider, key_prefix, sum(jobs) AS jobs, sum(succeeded) AS succeeded,
    sum(failed) AS failed, sum(canceled) AS canceled, sum(credits_spent) AS credits_spent
FROM usage_rollup GROUP BY 1, 2, 3, 4, 5;
DELETE FROM usage_rollup;
ALTER TABLE usage_rollup DROP CONSTRAINT usage_rollup_pkey;
ALTER TABLE usage_rollup DROP COLUMN provider_key;
ALTER TABLE usage_rollup DROP COLUMN billed;
ALTER TABLE usage_rollup DROP COLUMN provider_units;
ALTER TABLE usage_rollup DROP COLUMN provider_cost;
INSERT INTO usage_rollup (day, user_id, model, provider, key_prefix, jobs, succeeded, failed, canceled, credits_spent)
SELECT day, user_id, model, provider, key_prefix, jobs, succeeded, failed, canceled, credits_spent FROM folded;
DROP TABLE folded;
ALTER TABLE usage_rollup ADD PRIMARY KEY (day, user_id, model, provider, key_prefix);

DROP INDEX jobs_units_mismatch;
ALTER TABLE jobs DROP COLUMN provider_cost;
ALTER TABLE jobs DROP COLUMN units_charged;
ALTER TABLE jobs DROP COLUMN provider_units;
ALTER TABLE jobs DROP COLUMN billing;
