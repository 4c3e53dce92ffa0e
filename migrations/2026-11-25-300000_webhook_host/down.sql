ALTER TABLE client_webhook_events DROP COLUMN host;
