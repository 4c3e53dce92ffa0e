ALTER TABLE jobs DROP COLUMN priority;
ALTER TABLE jobs DROP COLUMN sent_at, DROP COLUMN waiting_for_capacity;
DROP INDEX jobs_slots_in_flight;
ALTER TABLE jobs DROP CONSTRAINT jobs_slot_has_provider;
ALTER TABLE jobs DROP COLUMN slot_key, DROP COLUMN slot_provider;
