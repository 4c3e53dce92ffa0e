DROP TABLE usage_sealed;
ALTER TABLE usage_rollup DROP CONSTRAINT usage_rollup_pkey;
CREATE TEMP TABLE merged AS
    SELECT day, user_id, model, sum(jobs) AS jobs, sum(succeeded) AS succeeded, sum(failed) AS failed,
        sum(canceled) AS canceled, sum(credits_spent) AS credits_spent
    FROM usage_rollup GROUP BY 1, 2, 3;
DELETE FROM usage_rollup;
ALTER TABLE usage_rollup DROP COLUMN provider;
INSERT INTO usage_rollup SELECT * FROM merged;
ALTER TABLE usage_rollup ADD PRIMARY KEY (day, user_id, model);
