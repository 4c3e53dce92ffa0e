DROP INDEX jobs_key_prefix_id;
