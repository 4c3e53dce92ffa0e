-- A key's budget `used` as a counter for its current period, kept by the statements that move
-- credits (accept, settle, release), so that an accept on a budgeted key checks it in O(1)
-- instead of summing the key's jobs of the period. `budget_period_start` is the start of the
-- period the counter counts (1970-01-01 for a `total` budget: every job is created after it); a job records the period it was
-- counted under (null when it was not counted), so that its final commit gives back to that
-- period only.
ALTER TABLE api_keys
    ADD COLUMN budget_period_start timestamptz,
    ADD COLUMN budget_used bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN budget_period_start timestamptz;

-- The counter of every budgeted key, derived once as its `used` is derived: holds of its jobs
-- not yet final, charges of its succeeded ones and of those retention removed.
WITH period AS (
    SELECT prefix, CASE budget_period
        WHEN 'day' THEN date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
        WHEN 'week' THEN date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
        WHEN 'month' THEN date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
        ELSE 'epoch'::timestamptz END AS start
    FROM api_keys WHERE budget_credits IS NOT NULL
)
UPDATE api_keys SET budget_period_start = period.start, budget_used =
    (SELECT COALESCE(SUM(CASE WHEN state IN ('queued', 'running') THEN credits_held
                              WHEN state = 'succeeded' THEN credits_actual ELSE 0 END), 0)
     FROM jobs WHERE jobs.key_prefix = period.prefix AND jobs.created_at >= period.start)
  + (SELECT COALESCE(SUM(credits), 0) FROM key_purged_charges c
     WHERE c.key_prefix = period.prefix AND c.day >= (period.start AT TIME ZONE 'UTC')::date)
FROM period WHERE api_keys.prefix = period.prefix;

UPDATE jobs SET budget_period_start = api_keys.budget_period_start
FROM api_keys
WHERE jobs.key_prefix = api_keys.prefix AND api_keys.budget_credits IS NOT NULL
  AND jobs.state IN ('queued', 'running') AND jobs.created_at >= api_keys.budget_period_start;
