-- Webhooks to clients. A job may name a URL its end is posted to; the event is recorded by the
-- same statement that makes the job final (the trigger below runs inside it), so a crash can
-- neither lose an event nor record one for a job that did not end. Dispatchers claim due events
-- with a lease (FOR UPDATE SKIP LOCKED), so each attempt is made once across replicas.
ALTER TABLE jobs ADD COLUMN webhook_url text;

CREATE TABLE client_webhook_events (
    job_id uuid PRIMARY KEY REFERENCES jobs (id),
    user_id uuid NOT NULL REFERENCES users (id),
    final_state text NOT NULL CHECK (final_state IN ('succeeded', 'failed', 'canceled')),
    url text NOT NULL,
    occurred_at timestamptz NOT NULL,
    -- Fixed by the first attempt: every attempt and redelivery sends the same bytes.
    body bytea,
    attempts jsonb NOT NULL DEFAULT '[]',
    delivered_at timestamptz,
    -- NULL once delivered or given up.
    next_attempt_at timestamptz,
    lease_until timestamptz
);
CREATE INDEX client_webhook_events_due ON client_webhook_events (next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;
CREATE INDEX client_webhook_events_pending ON client_webhook_events (occurred_at)
    WHERE next_attempt_at IS NOT NULL;
-- The dispatchers' sleep: when the first leased event frees up.
CREATE INDEX client_webhook_events_leased ON client_webhook_events (lease_until)
    WHERE next_attempt_at IS NOT NULL AND lease_until IS NOT NULL;

-- A user's signing secret, encrypted with GENJOBS_SECRET_KEY: a dump of the database alone
-- cannot sign.
CREATE TABLE webhook_secrets (
    user_id uuid PRIMARY KEY REFERENCES users (id),
    sealed bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION record_client_webhook_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO client_webhook_events (job_id, user_id, final_state, url, occurred_at, next_attempt_at)
    VALUES (NEW.id, NEW.user_id, NEW.state, NEW.webhook_url, NEW.finished_at, NEW.finished_at)
    ON CONFLICT (job_id) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_client_webhook_event AFTER UPDATE OF state ON jobs FOR EACH ROW
    WHEN (NEW.webhook_url IS NOT NULL
          AND NEW.state IN ('succeeded', 'failed', 'canceled')
          AND OLD.state IN ('queued', 'running'))
    EXECUTE FUNCTION record_client_webhook_event();
