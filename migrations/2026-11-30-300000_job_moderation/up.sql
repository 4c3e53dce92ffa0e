-- What a job's moderation check found (`passed`, `flagged`, `unavailable`, `unchecked`); null while
-- unchecked and for jobs not checked at all. A job is sent only once it reads `passed` or
-- `unchecked`, so a replica that takes a job over checks it again rather than send it unchecked.
ALTER TABLE jobs ADD COLUMN moderation text;

-- Usage reports count the jobs that failed `CONTENT_REFUSED` (flagged by moderation, or refused by
-- a provider's content policy); sealed days and purged jobs carry the count in the rollup.
ALTER TABLE usage_rollup ADD COLUMN content_refused int8 NOT NULL DEFAULT 0;
