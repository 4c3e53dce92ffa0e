-- A batch with a `webhook_url` posts one event when it ends, recorded by the statement that makes
-- its last item final, as a job's event is by its own final statement.
--
-- Each batch counts its items not yet final. The trigger below counts it down inside the
-- statement that makes an item final; the row lock of that update orders the batch's racing
-- last items, so exactly one of them finds none left, ends the batch, and records its event.
-- Existing batches are counted from their items.
ALTER TABLE batches ADD COLUMN unfinished integer NOT NULL DEFAULT 0 CHECK (unfinished >= 0);
UPDATE batches SET unfinished = (
    SELECT count(*) FROM jobs WHERE jobs.batch_id = batches.id AND jobs.state IN ('queued', 'running')
);
-- Only open batches (not ended, an item to finish) may have their window close.
DROP INDEX batches_open_expires_at;
CREATE INDEX batches_open_expires_at ON batches (expires_at) WHERE ended IS NULL AND unfinished > 0;

-- An event is a job's or a batch's: keyed by its subject's id (`id`, the `webhook-id` after
-- `msg_`), which job and batch ids, UUIDs made apart, never share.
ALTER TABLE client_webhook_events DROP CONSTRAINT client_webhook_events_pkey;
ALTER TABLE client_webhook_events ALTER COLUMN job_id DROP NOT NULL;
ALTER TABLE client_webhook_events ADD CONSTRAINT client_webhook_events_job_id_key UNIQUE (job_id);
ALTER TABLE client_webhook_events ADD COLUMN batch_id uuid REFERENCES batches (id);
ALTER TABLE client_webhook_events ADD COLUMN id uuid NOT NULL GENERATED ALWAYS AS (COALESCE(job_id, batch_id)) STORED;
ALTER TABLE client_webhook_events ADD PRIMARY KEY (id);
ALTER TABLE client_webhook_events DROP CONSTRAINT client_webhook_events_final_state_check;
ALTER TABLE client_webhook_events ADD CONSTRAINT client_webhook_events_final_state_check CHECK (
    (job_id IS NOT NULL AND batch_id IS NULL AND final_state IN ('succeeded', 'failed', 'canceled'))
    OR (job_id IS NULL AND batch_id IS NOT NULL AND final_state IN ('completed', 'expired', 'canceled'))
);

-- The batch's end is when its last item ended, or when it was ended if that was later; a batch
-- not ended whose last item ended after its window closed has expired (as `BatchView::state`).
CREATE FUNCTION count_finished_batch_item() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    batch batches%ROWTYPE;
BEGIN
    UPDATE batches SET unfinished = unfinished - 1 WHERE id = NEW.batch_id RETURNING * INTO batch;
    IF FOUND AND batch.unfinished = 0 AND batch.webhook_url IS NOT NULL THEN
        INSERT INTO client_webhook_events (batch_id, user_id, final_state, url, occurred_at, next_attempt_at)
        SELECT batch.id, batch.user_id,
            COALESCE(batch.ended, CASE WHEN last.at >= batch.expires_at THEN 'expired' ELSE 'completed' END),
            batch.webhook_url, COALESCE(GREATEST(last.at, batch.ended_at), now()),
            COALESCE(GREATEST(last.at, batch.ended_at), now())
        FROM (SELECT max(COALESCE(finished_at, canceled_at)) AS at FROM jobs WHERE jobs.batch_id = batch.id) last
        ON CONFLICT (id) DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_batch_item_finished AFTER UPDATE OF state ON jobs FOR EACH ROW
    WHEN (NEW.batch_id IS NOT NULL
          AND NEW.state IN ('succeeded', 'failed', 'canceled')
          AND OLD.state IN ('queued', 'running'))
    EXECUTE FUNCTION count_finished_batch_item();
