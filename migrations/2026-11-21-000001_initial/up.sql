-- Accounts hold their balances; the ledger below records every movement that changed them.
CREATE TABLE users (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    credits_available bigint NOT NULL CHECK (credits_available >= 0),
    credits_held bigint NOT NULL CHECK (credits_held >= 0),
    credits_spent bigint NOT NULL CHECK (credits_spent >= 0),
    credits_granted bigint NOT NULL,
    rate_limit_per_minute integer NOT NULL CHECK (rate_limit_per_minute > 0),
    max_concurrent_jobs integer NOT NULL CHECK (max_concurrent_jobs > 0),
    active_jobs integer NOT NULL CHECK (active_jobs >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_credits_balance CHECK (credits_available + credits_held + credits_spent = credits_granted)
);

-- Only a prefix and a SHA-256 of each key are kept.
CREATE TABLE api_keys (
    prefix text PRIMARY KEY,
    key_hash bytea NOT NULL CHECK (octet_length(key_hash) = 32),
    user_id uuid NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX api_keys_user_id ON api_keys (user_id);

CREATE TABLE jobs (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id),
    model text NOT NULL,
    modality text NOT NULL,
    state text NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    progress smallint NOT NULL CHECK (progress BETWEEN 0 AND 100),
    outputs jsonb,
    error jsonb,
    created_at timestamptz NOT NULL,
    started_at timestamptz,
    finished_at timestamptz,
    canceled_at timestamptz,
    credits_held bigint NOT NULL CHECK (credits_held >= 0),
    credits_actual bigint CHECK (credits_actual BETWEEN 0 AND credits_held),
    input jsonb NOT NULL,
    upstream jsonb,
    submit_attempted boolean NOT NULL,
    next_poll_at timestamptz,
    poll_failures integer NOT NULL,
    version bigint NOT NULL,
    lease_until timestamptz,
    CONSTRAINT jobs_final_has_no_poll CHECK (state IN ('queued', 'running') OR next_poll_at IS NULL),
    CONSTRAINT jobs_final_has_actual CHECK ((state IN ('queued', 'running')) = (credits_actual IS NULL))
);
-- Job ids are UUID v7: ordering by id is ordering by creation time.
CREATE INDEX jobs_user_id_id ON jobs (user_id, id DESC);
CREATE INDEX jobs_due ON jobs (next_poll_at) WHERE next_poll_at IS NOT NULL;

-- Append-only: grant (signed amount), hold, settle (amount charged, released the rest), release.
CREATE TABLE ledger (
    id bigserial PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id),
    job_id uuid REFERENCES jobs (id),
    kind text NOT NULL CHECK (kind IN ('grant', 'hold', 'settle', 'release')),
    amount bigint NOT NULL,
    released bigint NOT NULL DEFAULT 0 CHECK (released >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_job_movements_name_a_job CHECK ((kind = 'grant') = (job_id IS NULL)),
    CONSTRAINT ledger_job_movements_are_not_negative CHECK (kind = 'grant' OR amount >= 0)
);
CREATE INDEX ledger_user_id ON ledger (user_id);
-- Credits move exactly once per job: one hold, then at most one settle or release.
CREATE UNIQUE INDEX ledger_one_hold_per_job ON ledger (job_id) WHERE kind = 'hold';
CREATE UNIQUE INDEX ledger_one_final_movement_per_job ON ledger (job_id) WHERE kind IN ('settle', 'release');

CREATE TABLE idempotency_keys (
    user_id uuid NOT NULL REFERENCES users (id),
    key text NOT NULL,
    fingerprint text NOT NULL,
    job_id uuid NOT NULL REFERENCES jobs (id),
    created_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- Token buckets of the request rate limit, shared by every replica.
CREATE TABLE rate_limits (
    user_id uuid PRIMARY KEY REFERENCES users (id),
    tokens double precision NOT NULL,
    refilled_at timestamptz NOT NULL
);
