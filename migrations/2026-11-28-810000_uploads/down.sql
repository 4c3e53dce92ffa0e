DROP TABLE upload_days;
DROP TABLE uploads;
