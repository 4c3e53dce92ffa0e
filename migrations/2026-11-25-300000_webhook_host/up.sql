-- The destination host of each client webhook event (host and port, as the dispatcher's
-- `destination_host` reads a URL), kept by Postgres so that a claim can skip the hosts whose
-- delivery slots are full without parsing every due URL on every claim.
ALTER TABLE client_webhook_events ADD COLUMN host text NOT NULL
    GENERATED ALWAYS AS (lower(regexp_replace(substring(regexp_replace(url, '^.*?://', '') FROM '^[^/?#]*'), '^.*@', ''))) STORED;
