DROP INDEX jobs_provider_id;
CREATE INDEX jobs_provider_id ON jobs ((upstream ->> 'provider'), id DESC);
