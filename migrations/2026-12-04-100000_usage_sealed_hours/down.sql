-- Back to whole days: the last day sealed is the one before `sealed_before`'s. The hours sealed
-- of `sealed_before`'s own day are read from their jobs again, so what the rollups count of the
-- jobs still kept is taken out of them; what they count of its purged jobs stays, as the rollups
-- keep it for a day not sealed.
WITH partial AS (
    SELECT created_at, user_id, model, upstream, key_prefix, state, credits_actual, error, billing,
        provider_units, provider_cost
    FROM jobs, usage_sealed
    WHERE created_at >= date_trunc('day', sealed_before AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
      AND created_at < sealed_before
), counted AS (
    SELECT (created_at AT TIME ZONE 'UTC')::date AS day, user_id, model,
        coalesce(upstream ->> 'provider', '') AS provider, coalesce(key_prefix, '') AS key_prefix,
        coalesce(billing ->> 'key_hint', '') AS provider_key, count(*) AS jobs,
        count(*) FILTER (WHERE state = 'succeeded') AS succeeded, count(*) FILTER (WHERE state = 'failed') AS failed,
        count(*) FILTER (WHERE state = 'canceled') AS canceled, coalesce(sum(credits_actual), 0) AS credits_spent,
        count(provider_cost) AS billed, coalesce(sum(provider_units), 0) AS provider_units,
        coalesce(sum(provider_cost), 0) AS provider_cost,
        count(*) FILTER (WHERE state = 'failed' AND error ->> 'code' = 'CONTENT_REFUSED') AS content_refused
    FROM partial GROUP BY 1, 2, 3, 4, 5, 6
), by_key_prefix AS (
    UPDATE usage_rollup r SET jobs = r.jobs - c.jobs, succeeded = r.succeeded - c.succeeded,
        failed = r.failed - c.failed, canceled = r.canceled - c.canceled,
        credits_spent = r.credits_spent - c.credits_spent, billed = r.billed - c.billed,
        provider_units = r.provider_units - c.provider_units, provider_cost = r.provider_cost - c.provider_cost,
        content_refused = r.content_refused - c.content_refused
    FROM (
        SELECT day, user_id, model, provider, key_prefix, sum(jobs) AS jobs, sum(succeeded) AS succeeded,
            sum(failed) AS failed, sum(canceled) AS canceled, sum(credits_spent) AS credits_spent,
            sum(billed) AS billed, sum(provider_units) AS provider_units, sum(provider_cost) AS provider_cost,
            sum(content_refused) AS content_refused
        FROM counted GROUP BY 1, 2, 3, 4, 5
    ) c
    WHERE (r.day, r.user_id, r.model, r.provider, r.key_prefix) = (c.day, c.user_id, c.model, c.provider, c.key_prefix)
)
UPDATE usage_key_rollup r SET jobs = r.jobs - c.jobs, succeeded = r.succeeded - c.succeeded,
    failed = r.failed - c.failed, canceled = r.canceled - c.canceled,
    credits_spent = r.credits_spent - c.credits_spent, billed = r.billed - c.billed,
    provider_units = r.provider_units - c.provider_units, provider_cost = r.provider_cost - c.provider_cost,
    content_refused = r.content_refused - c.content_refused
FROM (
    SELECT day, user_id, provider, provider_key, sum(jobs) AS jobs, sum(succeeded) AS succeeded,
        sum(failed) AS failed, sum(canceled) AS canceled, sum(credits_spent) AS credits_spent,
        sum(billed) AS billed, sum(provider_units) AS provider_units, sum(provider_cost) AS provider_cost,
        sum(content_refused) AS content_refused
    FROM counted GROUP BY 1, 2, 3, 4
) c
WHERE (r.day, r.user_id, r.provider, r.provider_key) = (c.day, c.user_id, c.provider, c.provider_key);

ALTER TABLE usage_sealed ADD COLUMN through date;
UPDATE usage_sealed SET through = (sealed_before AT TIME ZONE 'UTC')::date - 1;
ALTER TABLE usage_sealed DROP COLUMN sealed_before;
