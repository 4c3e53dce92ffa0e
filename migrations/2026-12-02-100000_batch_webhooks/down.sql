DROP TRIGGER jobs_batch_item_finished ON jobs;
DROP FUNCTION count_finished_batch_item();
DELETE FROM client_webhook_events WHERE batch_id IS NOT NULL;
ALTER TABLE client_webhook_events DROP CONSTRAINT client_webhook_events_final_state_check;
ALTER TABLE client_webhook_events ADD CONSTRAINT client_webhook_events_final_state_check
    CHECK (final_state IN ('succeeded', 'failed', 'canceled'));
ALTER TABLE client_webhook_events DROP CONSTRAINT client_webhook_events_pkey;
ALTER TABLE client_webhook_events DROP COLUMN id;
ALTER TABLE client_webhook_events DROP COLUMN batch_id;
ALTER TABLE client_webhook_events DROP CONSTRAINT client_webhook_events_job_id_key;
ALTER TABLE client_webhook_events ALTER COLUMN job_id SET NOT NULL;
ALTER TABLE client_webhook_events ADD PRIMARY KEY (job_id);
DROP INDEX batches_open_expires_at;
CREATE INDEX batches_open_expires_at ON batches (expires_at) WHERE ended IS NULL;
ALTER TABLE batches DROP COLUMN unfinished;
