-- Keys form a tree: a key made with another is its child. `parent` names the maker;
-- `has_children` is set, on the parent's row, in the statement that adds a child, so that an
-- accept that locks the parent's row sees it on the row's newest version and counts the
-- subtree's jobs (the counter on the row counts only the key's own).
ALTER TABLE api_keys
    ADD COLUMN parent text REFERENCES api_keys (prefix),
    ADD COLUMN has_children boolean NOT NULL DEFAULT false;
CREATE INDEX api_keys_parent ON api_keys (parent) WHERE parent IS NOT NULL;
