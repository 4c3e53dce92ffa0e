-- Keys the service makes at its first start and every later start and replica reads back: the
-- key users' webhook secrets are sealed under (without GENJOBS_SECRET_KEY), the key output links
-- are signed under (without GENJOBS_LINK_SECRET), and the SHA-256 of a generated admin token
-- (without GENJOBS_ADMIN_TOKEN; the token itself is never kept). Whoever can read this table can
-- open the webhook secrets and sign links: set those variables to keep the keys out of the
-- database.
CREATE TABLE kept_secrets (
    name text PRIMARY KEY,
    value bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
