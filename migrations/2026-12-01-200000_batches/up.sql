-- A batch's record: what was fixed when it was accepted, and how it was ended early, if it was.
-- Its figures (counts, credits, start and end) are summed from its items when read, never kept
-- twice, so that no crash leaves them wrong.
CREATE TABLE batches (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id),
    key_prefix text,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    webhook_url text,
    metadata jsonb NOT NULL DEFAULT '{}',
    ended text CHECK (ended IN ('canceled', 'expired')),
    ended_at timestamptz,
    CONSTRAINT batches_ended_when CHECK ((ended IS NULL) = (ended_at IS NULL))
);
-- A user's batches, newest first (ids are UUID v7).
CREATE INDEX batches_user_id_id ON batches (user_id, id DESC);
-- The batches whose window may close.
CREATE INDEX batches_open_expires_at ON batches (expires_at) WHERE ended IS NULL;

-- A batch's items are ordinary jobs that know their place; an item counts against its owner's
-- concurrent-job limit only once admitted. `rate_batch_percent` is the batch price a job was
-- accepted at (100 for a job submitted on its own), so that its charge follows its hold.
-- `batch_id` has no foreign key: checked row by row, it took a fifth of the insert of a batch's
-- 5,000 items, and a batch is written in the same transaction as its items and never deleted.
ALTER TABLE jobs ADD COLUMN batch_id uuid;
ALTER TABLE jobs ADD COLUMN batch_custom_id text;
ALTER TABLE jobs ADD COLUMN batch_admitted boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN rate_batch_percent integer NOT NULL DEFAULT 100 CHECK (rate_batch_percent BETWEEN 1 AND 1000);
ALTER TABLE jobs ADD CONSTRAINT jobs_batch_item_named CHECK ((batch_id IS NULL) = (batch_custom_id IS NULL));
-- A batch's items in its order, and its figures' aggregate.
CREATE INDEX jobs_batch_id_id ON jobs (batch_id, id) WHERE batch_id IS NOT NULL;
-- The items waiting for admission, for the admissions' look-ahead.
CREATE INDEX jobs_awaiting_admission ON jobs (user_id, batch_id, id)
    WHERE batch_id IS NOT NULL AND NOT batch_admitted AND state IN ('queued', 'running');

-- The admitted batch items among `active_jobs`: they never refuse a job submitted on its own,
-- which is checked against `active_jobs - admitted_batch_items`.
ALTER TABLE users ADD COLUMN admitted_batch_items integer NOT NULL DEFAULT 0;
ALTER TABLE users ADD CONSTRAINT users_admitted_batch_items_are_active
    CHECK (admitted_batch_items BETWEEN 0 AND active_jobs);
