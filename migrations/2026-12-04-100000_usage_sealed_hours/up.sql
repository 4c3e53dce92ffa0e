-- Usage is sealed by the hour, not the day: everything created before `sealed_before` is counted
-- in the rollups alone, so that a report reads the jobs of the last hour or so instead of the
-- whole of today. A seal adds its hours to their day's rollup rows. One row; NULL while nothing
-- is sealed.
ALTER TABLE usage_sealed ADD COLUMN sealed_before timestamptz;
UPDATE usage_sealed SET sealed_before = (through + 1)::timestamp AT TIME ZONE 'UTC';
ALTER TABLE usage_sealed DROP COLUMN through;
