ALTER TABLE jobs DROP COLUMN rate_per, DROP COLUMN rate_credits;
DROP TABLE models;
DROP SEQUENCE models_version;
