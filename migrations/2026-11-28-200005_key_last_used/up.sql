-- When a key was last let in; each replica writes it at most once a minute per key.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
