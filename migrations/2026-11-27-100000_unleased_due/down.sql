DROP INDEX jobs_unleased_due;
