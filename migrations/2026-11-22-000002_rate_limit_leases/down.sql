ALTER TABLE rate_limits DROP COLUMN taken;
