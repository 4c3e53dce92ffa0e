ALTER TABLE jobs DROP COLUMN queue_position;
