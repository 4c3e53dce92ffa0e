DROP TABLE kept_secrets;
