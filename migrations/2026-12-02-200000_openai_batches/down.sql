DROP TABLE openai_batches;
DROP TABLE openai_files;
