-- The W3C traceparent of the request that submitted each job, for every replica's driver to
-- continue its trace; null when traces are off.
ALTER TABLE jobs ADD COLUMN trace_parent text;
