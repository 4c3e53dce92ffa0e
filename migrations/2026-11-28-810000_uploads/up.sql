-- Uploaded images, apart from the jobs: a job names an image by its link and never holds its
-- bytes. One row per content (its SHA-256), kept until `keep_until` (the latest upload's time to
-- live), and its bytes here only when the service has no output store. `upload_days` counts
-- what each user uploaded per UTC day, for `GENJOBS_UPLOAD_BYTES_PER_DAY`.
CREATE TABLE uploads (
    sha256 text PRIMARY KEY,
    size bigint NOT NULL,
    keep_until timestamptz NOT NULL,
    bytes bytea
);
-- Image bytes do not compress: kept out of line as they are, without trying.
ALTER TABLE uploads ALTER COLUMN bytes SET STORAGE EXTERNAL;
CREATE INDEX uploads_keep_until ON uploads (keep_until);

CREATE TABLE upload_days (
    user_id uuid NOT NULL,
    day date NOT NULL,
    bytes bigint NOT NULL,
    PRIMARY KEY (user_id, day)
);
