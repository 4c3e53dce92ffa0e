//! Files and OpenAI batches as `openai_files` and `openai_batches` keep them; a failed batch's
//! line errors are a jsonb array with a DTO of its own.

use std::collections::BTreeMap;

use diesel::prelude::*;
use genjobs_domain::ids::{BatchId, FileId, KeyPrefix, UserId};
use genjobs_domain::openai_batch::{BatchFile, LineError, OpenAiBatch};
use genjobs_domain::ports::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, from_jsonb, to_jsonb};
use crate::schema::{openai_batches, openai_files};

/// A row of `openai_files` without its content.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = openai_files, check_for_backend(diesel::pg::Pg))]
pub(crate) struct FileRow {
    pub id: Uuid,
    pub user_id: Uuid,
    pub key_prefix: Option<String>,
    pub filename: String,
    pub bytes: i64,
    pub created_at: OffsetDateTime,
}

/// A row of `openai_files` as inserted, content included.
#[derive(Debug, Insertable)]
#[diesel(table_name = openai_files, check_for_backend(diesel::pg::Pg))]
pub(crate) struct NewFileRow<'a> {
    pub id: Uuid,
    pub user_id: Uuid,
    pub key_prefix: Option<&'a str>,
    pub filename: &'a str,
    pub bytes: i64,
    pub created_at: OffsetDateTime,
    pub content: &'a [u8],
}

impl<'a> NewFileRow<'a> {
    pub(crate) fn of(file: &'a BatchFile, content: &'a [u8]) -> Result<Self, StoreError> {
        Ok(Self {
            id: file.id.as_uuid(),
            user_id: file.user_id.as_uuid(),
            key_prefix: file.key_prefix.as_ref().map(KeyPrefix::as_str),
            filename: &file.filename,
            bytes: i64::try_from(file.bytes).map_err(|e| StoreError::Internal(format!("a file's size: {e}")))?,
            created_at: file.created_at,
            content,
        })
    }
}

impl FileRow {
    pub(crate) fn into_file(self) -> Result<BatchFile, StoreError> {
        Ok(BatchFile {
            id: FileId::from_uuid(self.id),
            user_id: UserId::from_uuid(self.user_id),
            key_prefix: self.key_prefix.as_deref().map(KeyPrefix::of),
            filename: self.filename,
            bytes: u64::try_from(self.bytes).map_err(|e| corrupt("file size", e))?,
            created_at: self.created_at,
        })
    }
}

/// A line error as `openai_batches.errors` keeps it.
#[derive(Debug, Serialize, Deserialize)]
struct LineErrorRow {
    code: String,
    message: String,
    param: Option<String>,
    line: Option<u64>,
}

/// A row of `openai_batches`.
#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = openai_batches, check_for_backend(diesel::pg::Pg))]
pub(crate) struct OpenAiBatchRow {
    pub id: Uuid,
    pub user_id: Uuid,
    pub key_prefix: Option<String>,
    pub input_file_id: Uuid,
    pub endpoint: String,
    pub completion_window: String,
    pub created_at: OffsetDateTime,
    pub metadata: Value,
    pub errors: Value,
}

impl OpenAiBatchRow {
    pub(crate) fn of(batch: &OpenAiBatch) -> Result<Self, StoreError> {
        let errors: Vec<LineErrorRow> = batch
            .errors
            .iter()
            .map(|e| LineErrorRow {
                code: e.code.clone(),
                message: e.message.clone(),
                param: e.param.clone(),
                line: e.line,
            })
            .collect();
        Ok(Self {
            id: batch.id.as_uuid(),
            user_id: batch.user_id.as_uuid(),
            key_prefix: batch.key_prefix.as_ref().map(|prefix| prefix.as_str().to_owned()),
            input_file_id: batch.input_file_id.as_uuid(),
            endpoint: batch.endpoint.clone(),
            completion_window: batch.completion_window.clone(),
            created_at: batch.created_at,
            metadata: to_jsonb(&batch.metadata)?,
            errors: to_jsonb(&errors)?,
        })
    }

    pub(crate) fn into_batch(self) -> Result<OpenAiBatch, StoreError> {
        let errors = from_jsonb::<Vec<LineErrorRow>>("OpenAI batch errors", self.errors)?;
        Ok(OpenAiBatch {
            id: BatchId::from_uuid(self.id),
            user_id: UserId::from_uuid(self.user_id),
            key_prefix: self.key_prefix.as_deref().map(KeyPrefix::of),
            input_file_id: FileId::from_uuid(self.input_file_id),
            endpoint: self.endpoint,
            completion_window: self.completion_window,
            created_at: self.created_at,
            metadata: from_jsonb::<BTreeMap<String, String>>("OpenAI batch metadata", self.metadata)?,
            errors: errors
                .into_iter()
                .map(|e| LineError { code: e.code, message: e.message, param: e.param, line: e.line })
                .collect(),
        })
    }
}
