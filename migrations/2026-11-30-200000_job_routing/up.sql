-- `provider` of a generation request: which of the model's routes the job may take and how it
-- chooses among them (`{order, only, ignore, allow_fallbacks, sort}`). Fixed at acceptance and
-- read when the job is sent, on whichever replica sends it; null for a job that asked nothing.
ALTER TABLE jobs ADD COLUMN routing jsonb;
