CREATE TEMPORARY TABLE merged AS
    SELECT day, user_id, model, provider, sum(jobs) AS jobs, sum(succeeded) AS succeeded, sum(failed) AS failed,
        sum(canceled) AS canceled, sum(credits_spent) AS credits_spent
    FROM usage_rollup GROUP BY 1, 2, 3, 4;
DELETE FROM usage_rollup;
ALTER TABLE usage_rollup DROP CONSTRAINT usage_rollup_pkey;
ALTER TABLE usage_rollup DROP COLUMN key_prefix;
INSERT INTO usage_rollup (day, user_id, model, provider, jobs, succeeded, failed, canceled, credits_spent)
    SELECT day, user_id, model, provider, jobs, succeeded, failed, canceled, credits_spent FROM merged;
ALTER TABLE usage_rollup ADD PRIMARY KEY (day, user_id, model, provider);
DROP TABLE merged;
