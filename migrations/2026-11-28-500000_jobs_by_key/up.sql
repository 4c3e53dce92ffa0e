-- The operators' job listing filtered by key reads its first page newest first from an index in
-- the order of ids, as the other filters do (`store-postgres::store::job_search`).
CREATE INDEX jobs_key_prefix_id ON jobs (key_prefix, id DESC) WHERE key_prefix IS NOT NULL;
