-- The provider's own id of a job, by which its webhooks name it: a webhook finds its job
-- through this index. Jobs submitted before it have none, and are finished by polling.
ALTER TABLE jobs ADD COLUMN upstream_key text;
CREATE INDEX jobs_upstream_key ON jobs (upstream_key) WHERE upstream_key IS NOT NULL;
