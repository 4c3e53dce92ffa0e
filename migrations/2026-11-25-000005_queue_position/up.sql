-- How many requests are ahead of a job in its provider's queue, while it waits there.
ALTER TABLE jobs ADD COLUMN queue_position integer CHECK (queue_position >= 0);
