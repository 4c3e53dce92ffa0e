-- The catalog belongs to the operator: one jsonb document per model. Every change takes the
-- next catalog version; a deleted model keeps its row (deleted_at set), so that its accepted
-- jobs still run and the built-in catalog is stored only into a table that never held a model.
-- Models are listed in the order they were first put (position).
CREATE SEQUENCE models_version;
CREATE TABLE models (
    id text PRIMARY KEY,
    position bigint NOT NULL DEFAULT nextval('models_version'),
    document jsonb NOT NULL,
    version bigint NOT NULL DEFAULT nextval('models_version'),
    updated_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz
);

-- A job keeps the rate it was accepted at, so that a later price change moves neither its
-- hold nor its charge. Jobs accepted before paid their hold over the units they asked for.
ALTER TABLE jobs ADD COLUMN rate_per text, ADD COLUMN rate_credits bigint;
UPDATE jobs SET
    rate_per = CASE modality WHEN 'video' THEN 'second' ELSE 'image' END,
    rate_credits = credits_held / GREATEST(1, CASE modality
        WHEN 'video' THEN COALESCE((input ->> 'duration_sec')::bigint, 1)
        ELSE COALESCE((input ->> 'n')::bigint, 1) END);
ALTER TABLE jobs ALTER COLUMN rate_per SET NOT NULL, ALTER COLUMN rate_credits SET NOT NULL;
