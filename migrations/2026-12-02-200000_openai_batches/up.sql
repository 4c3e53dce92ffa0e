-- Files uploaded for OpenAI's Batch API, each with its content: at most 100 MB, read whole when
-- a batch is made of it. Kept apart from the jobs, so that no job read loads a file.
CREATE TABLE openai_files (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id),
    key_prefix text,
    filename text NOT NULL,
    bytes bigint NOT NULL CHECK (bytes >= 0),
    created_at timestamptz NOT NULL,
    content bytea NOT NULL
);

-- OpenAI batches: what their request named and, for a failed one, its file's line errors. An
-- accepted one's items are the native batch of the same id, which has no foreign key here:
-- the record is written before the native batch is accepted.
CREATE TABLE openai_batches (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id),
    key_prefix text,
    input_file_id uuid NOT NULL REFERENCES openai_files (id),
    endpoint text NOT NULL,
    completion_window text NOT NULL,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}',
    errors jsonb NOT NULL DEFAULT '[]'
);
-- A user's OpenAI batches, newest first (ids are UUID v7).
CREATE INDEX openai_batches_user_id_id ON openai_batches (user_id, id DESC);
