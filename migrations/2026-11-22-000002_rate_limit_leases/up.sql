-- A replica takes several tokens at once and spends them locally, so that most requests cost no
-- database round trip; `taken` tells it how many the last take granted.
ALTER TABLE rate_limits ADD COLUMN taken integer NOT NULL DEFAULT 0 CHECK (taken >= 0);
