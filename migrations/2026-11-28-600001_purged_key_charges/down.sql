DROP TABLE key_purged_charges;
