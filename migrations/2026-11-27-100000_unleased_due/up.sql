-- The claim read every due job to skip those under a live lease, and since a held job's
-- `next_poll_at` is written only when it changes what a client sees, every held job was due to
-- it: each driver walked all the jobs it held ten times a second. The jobs no lease holds get an
-- index of their own, so that a claim reads only what it can take; the jobs of a lease that ran
-- out are found through `job_leases` (see `CLAIM_DUE`). A claim or a freeing changes `lease_id`
-- and so is no longer a HOT update; both are rare next to the steps of held jobs.
CREATE INDEX jobs_unleased_due ON jobs (next_poll_at) WHERE lease_id IS NULL AND next_poll_at IS NOT NULL;

-- Claims no longer take jobs that name a lease no longer kept; free those now.
UPDATE jobs SET lease_id = NULL
WHERE next_poll_at IS NOT NULL AND lease_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM job_leases WHERE job_leases.id = jobs.lease_id);
