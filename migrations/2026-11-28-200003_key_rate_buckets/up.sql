-- A key with a rate limit of its own has a bucket beside its user's: the column holds a bucket's
-- id (a user's id, or a version 8 UUID made from a key's prefix), so it no longer names a user.
ALTER TABLE rate_limits DROP CONSTRAINT rate_limits_user_id_fkey;
