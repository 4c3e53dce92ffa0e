ALTER TABLE jobs DROP COLUMN lease_id;
ALTER TABLE jobs ADD COLUMN lease_until timestamptz;
DROP TABLE job_leases;
