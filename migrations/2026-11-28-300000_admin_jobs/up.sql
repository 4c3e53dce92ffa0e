-- The body each submission arrived with, as received (no default filled in), for operators;
-- null for the jobs accepted before.
ALTER TABLE jobs ADD COLUMN request jsonb;

-- The operators' job listing reads each filter's first page newest first from an index in the
-- order of ids: by owner `jobs_user_id_id` (already there), by state, by model and by provider
-- below; with no filter, the primary key. The provider's expression is the one the search
-- spells (`store-postgres::store::job_search`).
CREATE INDEX jobs_state_id ON jobs (state, id DESC);
CREATE INDEX jobs_model_id ON jobs (model, id DESC);
CREATE INDEX jobs_provider_id ON jobs ((upstream ->> 'provider'), id DESC);
