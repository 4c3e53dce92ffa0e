-- Usage reports by day, user, model, provider or key read the rollup at the grain they had before
-- bills were kept per provider key (a third as many rows at three keys a provider, which made
-- every report slower); the per-key figures (usage by provider key, the reconciliation) get a
-- rollup of their own, per day, user, provider and provider key, with the same sums. Sealing a day
-- and purging jobs write both.
CREATE TABLE usage_key_rollup (
    day date NOT NULL,
    user_id uuid NOT NULL REFERENCES users (id),
    provider text NOT NULL,
    provider_key text NOT NULL,
    jobs bigint NOT NULL,
    succeeded bigint NOT NULL,
    failed bigint NOT NULL,
    canceled bigint NOT NULL,
    credits_spent bigint NOT NULL,
    billed bigint NOT NULL,
    provider_units bigint NOT NULL,
    provider_cost bigint NOT NULL,
    content_refused bigint NOT NULL,
    PRIMARY KEY (day, user_id, provider, provider_key)
);

INSERT INTO usage_key_rollup (day, user_id, provider, provider_key, jobs, succeeded, failed, canceled, credits_spent,
    billed, provider_units, provider_cost, content_refused)
SELECT day, user_id, provider, provider_key, sum(jobs), sum(succeeded), sum(failed), sum(canceled), sum(credits_spent),
    sum(billed), sum(provider_units), sum(provider_cost), sum(content_refused)
FROM usage_rollup GROUP BY 1, 2, 3, 4;

-- The rollup's rows folded over their provider keys, back to the grain of the reports that read it.
CREATE TEMPORARY TABLE folded AS
SELECT day, user_id, model, provider, key_prefix, sum(jobs) AS jobs, sum(succeeded) AS succeeded,
    sum(failed) AS failed, sum(canceled) AS canceled, sum(credits_spent) AS credits_spent, sum(billed) AS billed,
    sum(provider_units) AS provider_units, sum(provider_cost) AS provider_cost, sum(content_refused) AS content_refused
FROM usage_rollup GROUP BY 1, 2, 3, 4, 5;
DELETE FROM usage_rollup;
ALTER TABLE usage_rollup DROP CONSTRAINT usage_rollup_pkey;
ALTER TABLE usage_rollup DROP COLUMN provider_key;
INSERT INTO usage_rollup (day, user_id, model, provider, key_prefix, jobs, succeeded, failed, canceled, credits_spent,
    billed, provider_units, provider_cost, content_refused)
SELECT day, user_id, model, provider, key_prefix, jobs, succeeded, failed, canceled, credits_spent, billed,
    provider_units, provider_cost, content_refused
FROM folded;
DROP TABLE folded;
ALTER TABLE usage_rollup ADD PRIMARY KEY (day, user_id, model, provider, key_prefix);
