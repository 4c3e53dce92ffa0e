-- What retention removed of each key's charges, by the UTC day its jobs were created. A key's
-- budget `used` adds it to what its kept jobs count, so that purging a succeeded job does not
-- give its charge back to the key's budget (periods start at a day's 00:00 UTC: whole days are
-- exact for every period, whatever the key's budget is changed to later).
CREATE TABLE key_purged_charges (
    key_prefix TEXT NOT NULL,
    day DATE NOT NULL,
    credits BIGINT NOT NULL,
    PRIMARY KEY (key_prefix, day)
);
