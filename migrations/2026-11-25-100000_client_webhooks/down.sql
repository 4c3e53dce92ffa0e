DROP TRIGGER jobs_client_webhook_event ON jobs;
DROP FUNCTION record_client_webhook_event();
DROP TABLE webhook_secrets;
DROP TABLE client_webhook_events;
ALTER TABLE jobs DROP COLUMN webhook_url;
