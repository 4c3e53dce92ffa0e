DELETE FROM rate_limits WHERE user_id NOT IN (SELECT id FROM users);
ALTER TABLE rate_limits ADD CONSTRAINT rate_limits_user_id_fkey FOREIGN KEY (user_id) REFERENCES users (id);
