-- Jobs their owner removed from a listing (OpenAI's `videos.delete`). A table of its own rather
-- than a column of `jobs`: a removal is rare, writes no job row (so no new tuple in the seven
-- indexes of `jobs`), and a page of kept jobs reads it by its primary key. A purged job takes
-- its removal with it.
CREATE TABLE removed_jobs (
    job_id uuid PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    removed_at timestamptz NOT NULL
);
