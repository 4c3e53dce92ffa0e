DROP TABLE removed_jobs;
