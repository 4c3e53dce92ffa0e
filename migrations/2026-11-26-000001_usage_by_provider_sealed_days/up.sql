-- Admin usage groups by provider: the rollup keeps which provider took the jobs it counts ('' for
-- jobs no provider took; rows rolled up before providers were recorded read as '').
ALTER TABLE usage_rollup ADD COLUMN provider text NOT NULL DEFAULT '';
ALTER TABLE usage_rollup ALTER COLUMN provider DROP DEFAULT;
ALTER TABLE usage_rollup DROP CONSTRAINT usage_rollup_pkey;
ALTER TABLE usage_rollup ADD PRIMARY KEY (day, user_id, model, provider);

-- Sealed days: every UTC day up to `through` is counted in usage_rollup alone, so that a report
-- reads its sealed days from a few rollup rows instead of from every job of them. A day is
-- sealed once it is over and all its jobs are final; final jobs never change, so the rollup stays
-- exact. One row; NULL while no day is sealed.
CREATE TABLE usage_sealed (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    through date
);
INSERT INTO usage_sealed (through) VALUES (NULL);
