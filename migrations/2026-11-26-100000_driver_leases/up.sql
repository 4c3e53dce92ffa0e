-- One lease per driver instead of one per job: a driver renewed every job row it held every
-- third of a lease, and since `jobs` keeps full pages and seven indexes, each renewed row was a
-- new tuple in every index (11,000 held jobs: 12 to 19 MB of WAL and 0.35 s per renewal). Now
-- a job names the lease it is under, and a renewal writes one row of `job_leases`; it reads the
-- open jobs (through `jobs_due`, as a claim does) to free those under the lease that its driver
-- let go of, which a per-job lease freed by running out. `lease_id` is in no index, so that
-- claiming or handing a job over never adds an index entry.
--
-- A job is free when it names no lease, or one that does not live (ran out, ended, or was
-- forgotten a day after it ran out). Jobs held under the old per-job leases are free at once:
-- stop the previous version's drivers before applying this (they hand their jobs back as they
-- drain).
CREATE TABLE job_leases (
    id uuid PRIMARY KEY,
    lives_until timestamptz NOT NULL
);

ALTER TABLE jobs DROP COLUMN lease_until;
ALTER TABLE jobs ADD COLUMN lease_id uuid;
