//! Rows as diesel reads and writes them, and their conversion to and from domain types. The jsonb
//! columns have DTOs of their own here, so that renaming a domain field changes no stored data.

use diesel::prelude::*;
use genjobs_domain::capacity::Priority;
use genjobs_domain::catalog::{Billing, Cost, CostUnit, PricePercent, ProviderBill, Rate, Unit};
use genjobs_domain::credits::{Balances, Credits};
use genjobs_domain::decimal::Decimal;
use genjobs_domain::ids::{BatchId, JobId, KeyHash, KeyPrefix, ModelId, UserId};
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::{
    BatchPlace, Job, JobError, JobErrorCode, JobPhase, JobState, Reached, StoredJob, Submission, UpstreamRef,
};
use genjobs_domain::modality::Modality;
use genjobs_domain::moderation::Moderation;
use genjobs_domain::output::{OutputCopy, OutputItem, OutputKind, OutputMeta, StoredFile};
use genjobs_domain::ports::{Account, Limits, StoreError};
use genjobs_domain::request::ReceivedRequest;
use genjobs_domain::trace::TraceParent;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::schema::users;

mod batches;
mod job_columns;
mod key_settings;
mod openai_batches;
mod routing;
mod settle;

pub(crate) use batches::{BATCH_VIEWS, BatchRow, BatchViewRow, end_name};
pub(crate) use job_columns::{AcceptBudgeted, AcceptedRow, JobRow, UpdateMany, accept_rows, insert_items, update_rows};
pub(crate) use key_settings::KeySettingsRow;
pub(crate) use openai_batches::{FileRow, NewFileRow, OpenAiBatchRow};
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
        let upstream = job.upstream();
        Ok(Self {
            id: job.id().as_uuid(),
            user_id: job.user_id().as_uuid(),
            key_prefix: job.key_prefix().map(|prefix| prefix.as_str().to_owned()),
            rate_percent: i32::try_from(job.rate().percent.get()).unwrap_or(i32::MAX),
            model: job.model().to_string(),
            modality: job.modality().as_str().to_owned(),
            state: job.state().as_str().to_owned(),
            moderation: job.moderation().map(|m| m.as_str().to_owned()),
            progress: i16::from(job.progress()),
            outputs: job
                .outputs()
                .map(|items| to_jsonb(&items.iter().map(OutputJson::from).collect::<Vec<_>>()))
                .transpose()?,
            error: job.error().map(|e| to_jsonb(&ErrorJson::from(e))).transpose()?,
            created_at: job.created_at(),
            started_at: job.started_at(),
            finished_at: job.finished_at(),
            canceled_at: job.canceled_at(),
            credits_held: amount(job.credits_held())?,
            credits_actual: job.credits_actual().map(amount).transpose()?,
            input: to_jsonb(&InputJson::from(job.input()))?,
            rate_per: match job.rate().per {
                Unit::Image => "image",
                Unit::Second => "second",
            }
            .to_owned(),
            rate_credits: i64::try_from(job.rate().credits)
                .map_err(|e| StoreError::Internal(format!("rate out of range: {e}")))?,
            priority: job.priority().as_str().to_owned(),
            start_by: job.start_by(),
            routing: routing::routing_column(job.routing())?,
            upstream: upstream.map(|u| to_jsonb(&UpstreamJson::from(u))).transpose()?,
            upstream_key: upstream.map(|u| u.key().to_owned()),
            queue_position: job.queue_position().map(|p| i32::try_from(p).unwrap_or(i32::MAX)),
            webhook_url: job.webhook_url().map(str::to_owned),
            request: job.request().map(|received| Value::Object(received.fields().clone())),
            trace_parent: job.trace().map(|trace| trace.as_str().to_owned()),
            submit_attempted: job.submit_attempted(),
            next_poll_at: job.next_poll_at(),
            poll_failures: i32::try_from(job.poll_failures()).unwrap_or(i32::MAX),
            waiting_for_capacity: job.waits_for_capacity(),
            sent_at: job.sent_at(),
            billing: job.billing().map(|billing| to_jsonb(&BillingJson::from(billing))).transpose()?,
            provider_units: job.provider_bill().map(|bill| bill.units.billionths()),
            units_charged: job.provider_bill().and_then(|bill| bill.units_charged).map(Decimal::billionths),
            provider_cost: job.provider_bill().map(|bill| bill.cost_usd.billionths()),
            batch_id: job.batch().map(|place| place.batch_id.as_uuid()),
            batch_custom_id: job.batch().map(|place| place.custom_id.clone()),
            batch_admitted: job.batch().is_some_and(|place| place.admitted),
            rate_batch_percent: i32::try_from(job.rate().batch_percent.get()).unwrap_or(i32::MAX),
            version: i64::try_from(job.version())
                .map_err(|e| StoreError::Internal(format!("version out of range: {e}")))?,
            lease_id: None,
        })
    }

    pub(crate) fn into_job(self) -> Result<Job, StoreError> {
        let id = JobId::from_uuid(self.id);
        let phase = self.phase()?;
        let stored = StoredJob {
            id,
            user_id: UserId::from_uuid(self.user_id),
            key_prefix: self.key_prefix.as_deref().map(KeyPrefix::of),
            model: ModelId::new(self.model),
            modality: Modality::parse(&self.modality).ok_or_else(|| corrupt("modality", &self.modality))?,
            created_at: self.created_at,
            credits_held: credits(self.credits_held)?,
            rate: Rate {
                per: match self.rate_per.as_str() {
                    "image" => Unit::Image,
                    "second" => Unit::Second,
                    other => return Err(corrupt("rate", other)),
                },
                credits: u64::try_from(self.rate_credits).map_err(|e| corrupt("rate", e))?,
                percent: price_percent(self.rate_percent)?,
                batch_percent: price_percent(self.rate_batch_percent)?,
            },
            input: from_jsonb::<InputJson>("input", self.input)?.into(),
            webhook_url: self.webhook_url,
            request: self
                .request
                .map(|value| match value {
                    Value::Object(fields) => Ok(ReceivedRequest::new(fields)),
                    other => Err(corrupt("request", other)),
                })
                .transpose()?,
            priority: Priority::parse(&self.priority).ok_or_else(|| corrupt("priority", &self.priority))?,
            start_by: self.start_by,
            routing: routing::routing_of(self.routing)?,
            trace: self
                .trace_parent
                .as_deref()
                .map(|text| TraceParent::parse(text).ok_or_else(|| corrupt("trace", text)))
                .transpose()?,
            batch: match (self.batch_id, self.batch_custom_id) {
                (Some(batch_id), Some(custom_id)) => Some(BatchPlace {
                    batch_id: BatchId::from_uuid(batch_id),
                    custom_id,
                    admitted: self.batch_admitted,
                }),
                (None, None) => None,
                _ => return Err(corrupt("batch item", "a batch without a custom_id, or the reverse")),
            },
            moderation: self
                .moderation
                .as_deref()
                .map(|text| Moderation::parse(text).ok_or_else(|| corrupt("moderation", text)))
                .transpose()?,
            phase,
            sent_at: self.sent_at,
            next_poll_at: self.next_poll_at,
            poll_failures: u32::try_from(self.poll_failures).unwrap_or(0),
            billing: self
                .billing
                .map(|value| from_jsonb::<BillingJson>("billing", value)?.into_domain())
                .transpose()?,
            bill: match (self.provider_units, self.provider_cost) {
                (Some(units), Some(cost)) => Some(ProviderBill {
                    units: Decimal::from_billionths(units),
                    units_charged: self.units_charged.map(Decimal::from_billionths),
                    cost_usd: Decimal::from_billionths(cost),
                }),
                _ => None,
            },
            version: u64::try_from(self.version).map_err(|e| corrupt("version", e))?,
        };
        Job::restore(stored).map_err(|e| corrupt("job", e))
    }

    /// The job's phase from the columns of its state: each state requires its own columns, so a
    /// row whose state and data disagree is refused here rather than read into a job.
    fn phase(&self) -> Result<JobPhase, StoreError> {
        let state = JobState::parse(&self.state).ok_or_else(|| corrupt("state", &self.state))?;
        let missing = |column: &str| corrupt("job", format!("a {} job without {column}", state.as_str()));
        let upstream = self
            .upstream
            .clone()
            .map(|value| from_jsonb::<UpstreamJson>("upstream", value).map(UpstreamJson::into_domain))
            .transpose()?;
        let progress = u8::try_from(self.progress).map_err(|e| corrupt("progress", e))?;
        let reached = || Reached {
            submission: match (&upstream, self.submit_attempted) {
                (Some(upstream), _) => Submission::Sent(upstream.clone()),
                (None, true) => Submission::Attempted,
                (None, false) => Submission::NotSent,
            },
            started_at: self.started_at,
            progress,
        };
        let error = || -> Result<JobError, StoreError> {
            let value = self.error.clone().ok_or_else(|| missing("an error"))?;
            from_jsonb::<ErrorJson>("error", value)?.into_domain()
        };
        Ok(match state {
            JobState::Queued => match upstream {
                Some(upstream) => JobPhase::Queued {
                    upstream,
                    position: self
                        .queue_position
                        .map(|p| u32::try_from(p).map_err(|e| corrupt("queue_position", e)))
                        .transpose()?,
                },
                None if self.submit_attempted => JobPhase::Sending,
                None if self.waiting_for_capacity => JobPhase::WaitingForCapacity,
                None => JobPhase::Accepted,
            },
            JobState::Running => JobPhase::Running {
                upstream: upstream.ok_or_else(|| missing("upstream"))?,
                started_at: self.started_at.ok_or_else(|| missing("started_at"))?,
                progress,
            },
            JobState::Succeeded => JobPhase::Succeeded {
                upstream: upstream.ok_or_else(|| missing("upstream"))?,
                started_at: self.started_at.ok_or_else(|| missing("started_at"))?,
                finished_at: self.finished_at.ok_or_else(|| missing("finished_at"))?,
                outputs: from_jsonb::<Vec<OutputJson>>(
                    "outputs",
                    self.outputs.clone().ok_or_else(|| missing("outputs"))?,
                )?
                .into_iter()
                .map(OutputJson::into_domain)
                .collect::<Result<_, _>>()?,
                credits_actual: credits(self.credits_actual.ok_or_else(|| missing("credits_actual"))?)?,
            },
            JobState::Failed => JobPhase::Failed {
                reached: reached(),
                finished_at: self.finished_at.ok_or_else(|| missing("finished_at"))?,
                error: error()?,
            },
            JobState::Canceled => JobPhase::Canceled {
                reached: reached(),
                canceled_at: self.canceled_at.ok_or_else(|| missing("canceled_at"))?,
                error: error()?,
            },
        })
    }
}

/// A route's cost as the `billing` column keeps it: `{"per", "usd", "key_hint"}`.
#[derive(Debug, Serialize, Deserialize)]
struct BillingJson {
    per: String,
    usd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key_hint: Option<String>,
}

impl From<&Billing> for BillingJson {
    fn from(billing: &Billing) -> Self {
        Self {
            per: billing.cost.per.as_str().to_owned(),
            usd: billing.cost.usd.to_string(),
            key_hint: billing.key_hint.clone(),
        }
    }
}

impl BillingJson {
    fn into_domain(self) -> Result<Billing, StoreError> {
        let per = CostUnit::parse(&self.per).ok_or_else(|| corrupt("billing", &self.per))?;
        let usd = self.usd.parse().map_err(|e| corrupt("billing", e))?;
        Ok(Billing { cost: Cost { per, usd }, key_hint: self.key_hint })
    }
}

/// The provider's reference as the `upstream` column keeps it: a jsonb object read into a typed
/// value once per row, so that polling never parses text.
#[derive(Debug, Serialize, Deserialize)]
struct UpstreamJson {
    provider: String,
    id: String,
    #[serde(default)]
    details: std::collections::BTreeMap<String, String>,
}

impl From<&UpstreamRef> for UpstreamJson {
    fn from(upstream: &UpstreamRef) -> Self {
        Self {
            provider: upstream.provider().to_owned(),
            id: upstream.key().to_owned(),
            details: upstream.details().clone(),
        }
    }
}

impl UpstreamJson {
    fn into_domain(self) -> UpstreamRef {
        self.details
            .into_iter()
            .fold(UpstreamRef::new(self.provider, self.id), |upstream, (name, value)| upstream.with_detail(name, value))
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    categories: Vec<String>,
}

impl From<&JobError> for ErrorJson {
    fn from(e: &JobError) -> Self {
        Self {
            kind: e.error_type().to_owned(),
            code: e.code.as_str().to_owned(),
            message: e.message.clone(),
            categories: e.categories.clone(),
        }
    }
}

impl ErrorJson {
    fn into_domain(self) -> Result<JobError, StoreError> {
        let code = JobErrorCode::parse(&self.code).ok_or_else(|| corrupt("error code", &self.code))?;
        Ok(JobError::new(code, self.message).with_categories(self.categories))
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
    pub created_at: OffsetDateTime,
    pub price_percent: i32,
}

/// A tier as stored: 1 to 1,000.
pub(crate) fn price_percent(value: i32) -> Result<PricePercent, StoreError> {
    u64::try_from(value).ok().and_then(|v| PricePercent::new(v).ok()).ok_or_else(|| corrupt("price_percent", value))
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
            price_percent: price_percent(self.price_percent)?,
            active_jobs: count(self.active_jobs)?,
            created_at: self.created_at,
        })
    }
}

pub(crate) fn key_hash(bytes: &[u8]) -> Result<KeyHash, StoreError> {
    <[u8; 32]>::try_from(bytes).map(KeyHash::from_bytes).map_err(|e| corrupt("key hash", e))
}
