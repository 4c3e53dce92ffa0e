-- The provider's reference becomes a typed jsonb object, {"provider", "id", "details"}, read
-- once per row instead of a JSON text re-parsed by the adapter on every poll. Every reference
-- written so far is fal's: a jsonb string holding the adapter's JSON text, or, before the port
-- became provider-neutral, that object itself. A string that is not JSON (never written by fal's
-- adapter) keeps its text as the id.
WITH old AS (
    SELECT id,
           CASE
               WHEN jsonb_typeof(upstream) = 'object' THEN upstream
               WHEN jsonb_typeof(upstream) = 'string' AND left(upstream #>> '{}', 1) = '{'
                   THEN (upstream #>> '{}')::jsonb
               ELSE jsonb_build_object('request_id', upstream #>> '{}')
           END AS reference
    FROM jobs
    WHERE upstream IS NOT NULL AND NOT (jsonb_typeof(upstream) = 'object' AND upstream ? 'provider')
)
UPDATE jobs
SET upstream = jsonb_build_object(
        'provider', 'fal',
        'id', old.reference ->> 'request_id',
        'details', old.reference - 'request_id'),
    upstream_key = old.reference ->> 'request_id'
FROM old
WHERE jobs.id = old.id;
