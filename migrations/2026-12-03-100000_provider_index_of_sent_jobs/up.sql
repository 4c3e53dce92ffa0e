-- A job has a provider only once it is sent: the index of the operators' listing by provider
-- holds the sent jobs alone, so that an accept (5,000 of them for a batch) writes one index
-- entry fewer. A filter on the provider (`(upstream ->> 'provider') = $1`) implies the condition,
-- so the listing keeps using it.
DROP INDEX jobs_provider_id;
CREATE INDEX jobs_provider_id ON jobs ((upstream ->> 'provider'), id DESC) WHERE (upstream ->> 'provider') IS NOT NULL;
