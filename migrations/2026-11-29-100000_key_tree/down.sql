DROP INDEX api_keys_parent;
ALTER TABLE api_keys DROP COLUMN has_children, DROP COLUMN parent;
