DROP INDEX users_name_pattern;
ALTER TABLE jobs DROP COLUMN rate_percent;
ALTER TABLE users DROP COLUMN price_percent;
