-- `start_within_secs`: the time by which a job must have started running at its provider, or it
-- fails `DEADLINE_EXCEEDED`. Fixed at acceptance; null for a job that set no such deadline. The
-- driver looks at a job yet to start by then (its `next_poll_at` is never later), so no index.
ALTER TABLE jobs ADD COLUMN start_by timestamptz;
