DROP TABLE rate_limits;
DROP TABLE idempotency_keys;
DROP TABLE ledger;
DROP TABLE jobs;
DROP TABLE api_keys;
DROP TABLE users;
