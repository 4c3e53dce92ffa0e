-- Provider capacity: where a job stands at its provider's keys. `slot_provider` names the
-- provider; with `slot_key` (a fingerprint of the key, never the key) the job holds a slot of
-- that key, and without it the job waits for a slot there. A key's jobs in flight are counted
-- from these columns and the job's state, so the count is what the table says at every moment: a
-- crash leaks no slot, and a job's final commit gives its slot back with no other write. The
-- partial index holds only the jobs not final, so counting and ranking read no finished job.
ALTER TABLE jobs ADD COLUMN slot_provider text, ADD COLUMN slot_key text;
ALTER TABLE jobs ADD CONSTRAINT jobs_slot_has_provider CHECK (slot_key IS NULL OR slot_provider IS NOT NULL);
CREATE INDEX jobs_slots_in_flight ON jobs (slot_provider, slot_key)
    WHERE slot_provider IS NOT NULL AND state IN ('queued', 'running');

-- A job that found no slot waits, unsent, with `meta.waiting_for`; and the job timeout counts from
-- the moment the provider took the job. Jobs sent before this count from their acceptance.
ALTER TABLE jobs ADD COLUMN waiting_for_capacity boolean NOT NULL DEFAULT false,
    ADD COLUMN sent_at timestamptz;

-- `low` jobs are sent only while no `normal` job waits for the same provider.
ALTER TABLE jobs ADD COLUMN priority text NOT NULL DEFAULT 'normal' CHECK (priority IN ('normal', 'low'));
