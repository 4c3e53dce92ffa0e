ALTER TABLE jobs DROP COLUMN trace_parent;
