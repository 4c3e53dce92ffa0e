ALTER TABLE usage_rollup DROP COLUMN content_refused;
ALTER TABLE jobs DROP COLUMN moderation;
