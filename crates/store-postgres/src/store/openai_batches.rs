//! The OpenAI batches port over Postgres: `openai_files` (a file and its content in one row,
//! read without the content but when it is asked for) and `openai_batches`.

use async_trait::async_trait;
use bytes::Bytes;
use diesel::prelude::*;
use diesel::upsert::excluded;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::ids::{BatchId, FileId, UserId};
use genjobs_domain::openai_batch::{BatchFile, OpenAiBatch};
use genjobs_domain::ports::{OpenAiBatchStore, StoreError};

use super::PgStore;
use crate::rows::{FileRow, NewFileRow, OpenAiBatchRow};
use crate::schema::{openai_batches, openai_files};

#[async_trait]
impl OpenAiBatchStore for PgStore {
    async fn put_file(&self, file: &BatchFile, content: Bytes) -> Result<(), StoreError> {
        let row = NewFileRow::of(file, &content)?;
        self.in_session(async |conn: &mut AsyncPgConnection| {
            diesel::insert_into(openai_files::table).values(&row).execute(conn).await
        })
        .await
        .map(drop)
    }

    async fn file(&self, id: FileId) -> Result<Option<BatchFile>, StoreError> {
        let row: Option<FileRow> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                openai_files::table
                    .find(id.as_uuid())
                    .select(FileRow::as_select())
                    .first(conn)
                    .map(OptionalExtension::optional)
                    .boxed()
            })
            .await?;
        row.map(FileRow::into_file).transpose()
    }

    async fn file_content(&self, id: FileId) -> Result<Option<Bytes>, StoreError> {
        let content: Option<Vec<u8>> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                openai_files::table
                    .find(id.as_uuid())
                    .select(openai_files::content)
                    .first(conn)
                    .map(OptionalExtension::optional)
                    .boxed()
            })
            .await?;
        Ok(content.map(Bytes::from))
    }

    async fn put_openai_batch(&self, batch: &OpenAiBatch) -> Result<(), StoreError> {
        let row = OpenAiBatchRow::of(batch)?;
        self.in_session(async |conn: &mut AsyncPgConnection| {
            diesel::insert_into(openai_batches::table)
                .values(&row)
                .on_conflict(openai_batches::id)
                .do_update()
                .set((
                    openai_batches::metadata.eq(excluded(openai_batches::metadata)),
                    openai_batches::errors.eq(excluded(openai_batches::errors)),
                ))
                .execute(conn)
                .await
        })
        .await
        .map(drop)
    }

    async fn remove_openai_batch(&self, id: BatchId) -> Result<(), StoreError> {
        self.in_session(async |conn: &mut AsyncPgConnection| {
            diesel::delete(openai_batches::table.find(id.as_uuid())).execute(conn).await
        })
        .await
        .map(drop)
    }

    async fn openai_batch(&self, id: BatchId) -> Result<Option<OpenAiBatch>, StoreError> {
        let row: Option<OpenAiBatchRow> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                openai_batches::table
                    .find(id.as_uuid())
                    .select(OpenAiBatchRow::as_select())
                    .first(conn)
                    .map(OptionalExtension::optional)
                    .boxed()
            })
            .await?;
        row.map(OpenAiBatchRow::into_batch).transpose()
    }

    async fn openai_batches(
        &self,
        user_id: UserId,
        before: Option<BatchId>,
        limit: usize,
    ) -> Result<Vec<OpenAiBatch>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<OpenAiBatchRow> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let mut query = openai_batches::table
                    .filter(openai_batches::user_id.eq(user_id.as_uuid()))
                    .select(OpenAiBatchRow::as_select())
                    .order(openai_batches::id.desc())
                    .limit(limit)
                    .into_boxed();
                if let Some(before) = before {
                    query = query.filter(openai_batches::id.lt(before.as_uuid()));
                }
                query.load(conn).boxed()
            })
            .await?;
        rows.into_iter().map(OpenAiBatchRow::into_batch).collect()
    }
}
