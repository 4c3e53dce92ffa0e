-- What providers bill the operator. A job sent on a route with a cost keeps that cost (and the
-- last characters of the provider key it went on) in `billing` from its submission on; its final
-- transition writes its bill in the same statement: the units billed, the units the user was
-- charged for, and the cost, each in billionths (exact decimals with nine fractional digits).
ALTER TABLE jobs ADD COLUMN billing jsonb;
ALTER TABLE jobs ADD COLUMN provider_units bigint;
ALTER TABLE jobs ADD COLUMN units_charged bigint;
ALTER TABLE jobs ADD COLUMN provider_cost bigint;

-- The reconciliation's mismatches (jobs billed more units than charged) are few: a partial index
-- finds them by creation day without reading every job.
CREATE INDEX jobs_units_mismatch ON jobs (created_at) WHERE provider_units > units_charged;

-- Sealed days and purged jobs keep their bills in the rollup, per provider key ('' for jobs of
-- no known key, and for rows rolled up before bills were kept), so that usage and reconciliation
-- read sealed days from the rollup alone.
ALTER TABLE usage_rollup ADD COLUMN provider_key text NOT NULL DEFAULT '';
ALTER TABLE usage_rollup ALTER COLUMN provider_key DROP DEFAULT;
ALTER TABLE usage_rollup ADD COLUMN billed bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_rollup ADD COLUMN provider_units bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_rollup ADD COLUMN provider_cost bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_rollup DROP CONSTRAINT usage_rollup_pkey;
ALTER TABLE usage_rollup ADD PRIMARY KEY (day, user_id, model, provider, key_prefix, provider_key);
