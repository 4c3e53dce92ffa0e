//! Rows as diesel reads and writes them, and their conversion to and from domain types. The jsonb
//! columns have DTOs of their own here, so that renaming a domain field changes no stored data.

use diesel::prelude::*;
use genjobs_domain::catalog::{Rate, Unit};
use genjobs_domain::credits::{Balances, Credits};
use genjobs_domain::ids::{JobId, KeyHash, ModelId, UserId};
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::{Job, JobError, JobErrorCode, JobRecord, JobState, UpstreamRef};
use genjobs_domain::modality::Modality;
use genjobs_domain::output::{OutputCopy, OutputItem, OutputKind, OutputMeta, StoredFile};
use genjobs_domain::ports::{Account, Limits, StoreError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::schema::users;

mod job_columns;
mod settle;

pub(crate) use job_columns::{Accept, JobRow, UpdateMany, update_rows};
pub(crate) use settle::Settle;

fn corrupt(what: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("stored {what} cannot be read: {detail}"))
}

fn to_jsonb<T: Serialize>(value: &T) -> Result<Value, StoreError> {
    serde_json::to_value(value).map_err(|e| StoreError::Internal(format!("cannot serialize a job column: {e}")))
}

fn from_jsonb<T: DeserializeOwned>(what: &str, value: Value) -> Result<T, StoreError> {
    serde_json::from_value(value).map_err(|e| corrupt(what, e))
}

pub(crate) fn credits(value: i64) -> Result<Credits, StoreError> {
    u64::try_from(value).map(Credits::new).map_err(|e| corrupt("credits", e))
}

pub(crate) fn amount(credits: Credits) -> Result<i64, StoreError> {
    i64::try_from(credits.get()).map_err(|e| StoreError::Internal(format!("credits out of range: {e}")))
}

impl JobRow {
    pub(crate) fn from_job(job: &Job) -> Result<Self, StoreError> {
        let r = job.record();
        Ok(Self {
            id: r.id.as_uuid(),
            user_id: r.user_id.as_uuid(),
            model: r.model.to_string(),
            modality: r.modality.as_str().to_owned(),
            state: r.state.as_str().to_owned(),
            progress: i16::from(r.progress),
            outputs: r
                .outputs
                .as_ref()
                .map(|items| to_jsonb(&items.iter().map(OutputJson::from).collect::<Vec<_>>()))
                .transpose()?,
            error: r.error.as_ref().map(|e| to_jsonb(&ErrorJson::from(e))).transpose()?,
            created_at: r.created_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
            canceled_at: r.canceled_at,
            credits_held: amount(r.credits_held)?,
            credits_actual: r.credits_actual.map(amount).transpose()?,
            input: to_jsonb(&InputJson::from(&r.input))?,
            rate_per: match r.rate.per {
                Unit::Image => "image",
                Unit::Second => "second",
            }
            .to_owned(),
            rate_credits: i64::try_from(r.rate.credits)
                .map_err(|e| StoreError::Internal(format!("rate out of range: {e}")))?,
            upstream: r.upstream.as_ref().map(upstream_to_jsonb),
            upstream_key: r.upstream.as_ref().and_then(|u| u.key()).map(str::to_owned),
            queue_position: r.queue_position.map(|p| i32::try_from(p).unwrap_or(i32::MAX)),
            webhook_url: r.webhook_url.clone(),
            submit_attempted: r.submit_attempted,
            next_poll_at: r.next_poll_at,
            poll_failures: i32::try_from(r.poll_failures).unwrap_or(i32::MAX),
            version: i64::try_from(r.version)
                .map_err(|e| StoreError::Internal(format!("version out of range: {e}")))?,
            lease_until: None,
        })
    }

    pub(crate) fn into_job(self) -> Result<Job, StoreError> {
        let outputs = self
            .outputs
            .map(|v| from_jsonb::<Vec<OutputJson>>("outputs", v)?.into_iter().map(OutputJson::into_domain).collect())
            .transpose()?;
        let record = JobRecord {
            id: JobId::from_uuid(self.id),
            user_id: UserId::from_uuid(self.user_id),
            model: ModelId::new(self.model),
            modality: Modality::parse(&self.modality).ok_or_else(|| corrupt("modality", &self.modality))?,
            state: JobState::parse(&self.state).ok_or_else(|| corrupt("state", &self.state))?,
            progress: u8::try_from(self.progress).map_err(|e| corrupt("progress", e))?,
            outputs,
            error: self.error.map(|v| from_jsonb::<ErrorJson>("error", v)?.into_domain()).transpose()?,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            canceled_at: self.canceled_at,
            credits_held: credits(self.credits_held)?,
            credits_actual: self.credits_actual.map(credits).transpose()?,
            input: from_jsonb::<InputJson>("input", self.input)?.into(),
            rate: Rate {
                per: match self.rate_per.as_str() {
                    "image" => Unit::Image,
                    "second" => Unit::Second,
                    other => return Err(corrupt("rate", other)),
                },
                credits: u64::try_from(self.rate_credits).map_err(|e| corrupt("rate", e))?,
            },
            upstream: self.upstream.map(|value| upstream_from_jsonb(value, self.upstream_key)),
            queue_position: self
                .queue_position
                .map(|p| u32::try_from(p).map_err(|e| corrupt("queue_position", e)))
                .transpose()?,
            webhook_url: self.webhook_url,
            submit_attempted: self.submit_attempted,
            next_poll_at: self.next_poll_at,
            poll_failures: u32::try_from(self.poll_failures).unwrap_or(0),
            version: u64::try_from(self.version).map_err(|e| corrupt("version", e))?,
        };
        Job::restore(record).map_err(|e| corrupt("job", e))
    }
}

/// An output item as the `outputs` column keeps it.
#[derive(Debug, Serialize, Deserialize)]
struct OutputJson {
    url: String,
    #[serde(rename = "type")]
    kind: String,
    meta: MetaJson,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    copy: Option<CopyJson>,
}

/// The gateway's copy of an output: `{"stored": false}`, or `{"stored": true, size, …}`.
#[derive(Debug, Serialize, Deserialize)]
struct CopyJson {
    stored: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
}

impl From<&OutputCopy> for CopyJson {
    fn from(copy: &OutputCopy) -> Self {
        match copy {
            OutputCopy::Stored(file) => Self {
                stored: true,
                size: Some(file.size),
                content_type: Some(file.content_type.clone()),
                sha256: Some(file.sha256.clone()),
            },
            OutputCopy::Failed => Self { stored: false, size: None, content_type: None, sha256: None },
        }
    }
}

impl CopyJson {
    fn into_domain(self) -> Result<OutputCopy, StoreError> {
        match self {
            CopyJson { stored: false, .. } => Ok(OutputCopy::Failed),
            CopyJson { stored: true, size: Some(size), content_type: Some(content_type), sha256: Some(sha256) } => {
                Ok(OutputCopy::Stored(StoredFile { size, content_type, sha256 }))
            }
            CopyJson { .. } => Err(corrupt("output copy", "a stored copy without its size, type or digest")),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct MetaJson {
    content_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
}

impl From<&OutputItem> for OutputJson {
    fn from(item: &OutputItem) -> Self {
        let m = &item.meta;
        Self {
            url: item.url.clone(),
            kind: item.kind.as_str().to_owned(),
            meta: MetaJson {
                content_type: m.content_type.clone(),
                width: m.width,
                height: m.height,
                duration_sec: m.duration_sec,
                seed: m.seed,
            },
            copy: item.copy.as_ref().map(CopyJson::from),
        }
    }
}

impl OutputJson {
    fn into_domain(self) -> Result<OutputItem, StoreError> {
        let m = self.meta;
        Ok(OutputItem {
            url: self.url,
            kind: OutputKind::parse(&self.kind).ok_or_else(|| corrupt("output type", &self.kind))?,
            meta: OutputMeta {
                content_type: m.content_type,
                width: m.width,
                height: m.height,
                duration_sec: m.duration_sec,
                seed: m.seed,
            },
            copy: self.copy.map(CopyJson::into_domain).transpose()?,
        })
    }
}

/// A job's error as the `error` column keeps it.
#[derive(Debug, Serialize, Deserialize)]
struct ErrorJson {
    #[serde(rename = "type")]
    kind: String,
    code: String,
    message: String,
}

impl From<&JobError> for ErrorJson {
    fn from(e: &JobError) -> Self {
        Self { kind: e.error_type().to_owned(), code: e.code.as_str().to_owned(), message: e.message.clone() }
    }
}

impl ErrorJson {
    fn into_domain(self) -> Result<JobError, StoreError> {
        let code = JobErrorCode::parse(&self.code).ok_or_else(|| corrupt("error code", &self.code))?;
        Ok(JobError::new(code, self.message))
    }
}

/// A job's validated request as the `input` column keeps it.
#[derive(Debug, Serialize, Deserialize)]
struct InputJson {
    prompt: String,
    #[serde(default)]
    negative_prompt: Option<String>,
    aspect_ratio: String,
    #[serde(default)]
    resolution: Option<String>,
    #[serde(default)]
    duration_sec: Option<u32>,
    #[serde(default)]
    n: Option<u8>,
    #[serde(default)]
    seed: Option<u32>,
    #[serde(default)]
    image_inputs: Vec<String>,
    #[serde(default)]
    extra: Option<Map<String, Value>>,
}

impl From<&GenerationInput> for InputJson {
    fn from(i: &GenerationInput) -> Self {
        Self {
            prompt: i.prompt.clone(),
            negative_prompt: i.negative_prompt.clone(),
            aspect_ratio: i.aspect_ratio.clone(),
            resolution: i.resolution.clone(),
            duration_sec: i.duration_sec,
            n: i.n,
            seed: i.seed,
            image_inputs: i.image_inputs.clone(),
            extra: i.extra.clone(),
        }
    }
}

impl From<InputJson> for GenerationInput {
    fn from(i: InputJson) -> Self {
        Self {
            prompt: i.prompt,
            negative_prompt: i.negative_prompt,
            aspect_ratio: i.aspect_ratio,
            resolution: i.resolution,
            duration_sec: i.duration_sec,
            n: i.n,
            seed: i.seed,
            image_inputs: i.image_inputs,
            extra: i.extra,
        }
    }
}

/// The provider's opaque reference as the `upstream` column keeps it: a jsonb string. References
/// written before the port became provider-neutral are objects; they read back as their JSON
/// text, which is what the provider adapter wrote.
fn upstream_to_jsonb(upstream: &UpstreamRef) -> Value {
    Value::String(upstream.as_str().to_owned())
}

fn upstream_from_jsonb(value: Value, key: Option<String>) -> UpstreamRef {
    let text = match value {
        Value::String(text) => text,
        other => other.to_string(),
    };
    match key {
        Some(key) => UpstreamRef::keyed(text, key),
        None => UpstreamRef::new(text),
    }
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = users, check_for_backend(diesel::pg::Pg))]
pub(crate) struct UserRow {
    pub id: Uuid,
    pub name: String,
    pub credits_available: i64,
    pub credits_held: i64,
    pub credits_spent: i64,
    pub rate_limit_per_minute: i32,
    pub max_concurrent_jobs: i32,
    pub active_jobs: i32,
}

impl UserRow {
    pub(crate) fn into_account(self) -> Result<Account, StoreError> {
        let count = |v: i32| u32::try_from(v).map_err(|e| corrupt("limit", e));
        Ok(Account {
            user_id: UserId::from_uuid(self.id),
            name: self.name,
            balances: Balances {
                available: credits(self.credits_available)?,
                held: credits(self.credits_held)?,
                spent: credits(self.credits_spent)?,
            },
            limits: Limits {
                rate_limit_per_minute: count(self.rate_limit_per_minute)?,
                max_concurrent_jobs: count(self.max_concurrent_jobs)?,
            },
            active_jobs: count(self.active_jobs)?,
        })
    }
}

pub(crate) fn key_hash(bytes: &[u8]) -> Result<KeyHash, StoreError> {
    <[u8; 32]>::try_from(bytes).map(KeyHash::from_bytes).map_err(|e| corrupt("key hash", e))
}
