-- Back to fal's JSON text inside a jsonb string.
UPDATE jobs
SET upstream = to_jsonb(((upstream -> 'details') || jsonb_build_object('request_id', upstream ->> 'id'))::text)
WHERE upstream IS NOT NULL AND jsonb_typeof(upstream) = 'object' AND upstream ? 'provider';
