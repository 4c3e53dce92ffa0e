//! Rows as diesel reads and writes them, and their conversion to and from domain types.

use diesel::prelude::*;
use genjobs_domain::catalog::Modality;
use genjobs_domain::credits::{Balances, Credits};
use genjobs_domain::ids::{JobId, KeyHash, ModelId, UserId};
use genjobs_domain::job::{Job, JobState};
use genjobs_domain::ports::{Account, Limits, StoreError};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::schema::{jobs, users};

#[derive(Debug, Clone, Queryable, QueryableByName, Selectable, Insertable)]
#[diesel(table_name = jobs, check_for_backend(diesel::pg::Pg), treat_none_as_null = true)]
pub(crate) struct JobRow {
    pub id: Uuid,
    pub user_id: Uuid,
    pub model: String,
    pub modality: String,
    pub state: String,
    pub progress: i16,
    pub outputs: Option<Value>,
    pub error: Option<Value>,
    pub created_at: OffsetDateTime,
    pub started_at: Option<OffsetDateTime>,
    pub finished_at: Option<OffsetDateTime>,
    pub canceled_at: Option<OffsetDateTime>,
    pub credits_held: i64,
    pub credits_actual: Option<i64>,
    pub input: Value,
    pub upstream: Option<Value>,
    pub submit_attempted: bool,
    pub next_poll_at: Option<OffsetDateTime>,
    pub poll_failures: i32,
    pub version: i64,
    pub lease_until: Option<OffsetDateTime>,
}

/// The columns a transition may change: everything but the job's identity, its creation and
/// its lease, which belongs to the driver holding it.
#[derive(Debug, Clone, AsChangeset)]
#[diesel(table_name = jobs, check_for_backend(diesel::pg::Pg), treat_none_as_null = true)]
pub(crate) struct JobUpdate<'a> {
    pub state: &'a str,
    pub progress: i16,
    pub outputs: Option<&'a Value>,
    pub error: Option<&'a Value>,
    pub started_at: Option<OffsetDateTime>,
    pub finished_at: Option<OffsetDateTime>,
    pub canceled_at: Option<OffsetDateTime>,
    pub credits_actual: Option<i64>,
    pub upstream: Option<&'a Value>,
    pub submit_attempted: bool,
    pub next_poll_at: Option<OffsetDateTime>,
    pub poll_failures: i32,
    pub version: i64,
}

impl JobRow {
    pub(crate) fn update(&self) -> JobUpdate<'_> {
        JobUpdate {
            state: &self.state,
            progress: self.progress,
            outputs: self.outputs.as_ref(),
            error: self.error.as_ref(),
            started_at: self.started_at,
            finished_at: self.finished_at,
            canceled_at: self.canceled_at,
            credits_actual: self.credits_actual,
            upstream: self.upstream.as_ref(),
            submit_attempted: self.submit_attempted,
            next_poll_at: self.next_poll_at,
            poll_failures: self.poll_failures,
            version: self.version,
        }
    }
}

fn corrupt(what: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("stored {what} cannot be read: {detail}"))
}

fn json<T: serde::Serialize>(value: &T) -> Result<Value, StoreError> {
    serde_json::to_value(value).map_err(|e| StoreError::Internal(e.to_string()))
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, value: Value) -> Result<T, StoreError> {
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
        Ok(Self {
            id: job.id.as_uuid(),
            user_id: job.user_id.as_uuid(),
            model: job.model.to_string(),
            modality: job.modality.as_str().to_owned(),
            state: job.state.as_str().to_owned(),
            progress: i16::from(job.progress),
            outputs: job.outputs.as_ref().map(json).transpose()?,
            error: job.error.as_ref().map(json).transpose()?,
            created_at: job.created_at,
            started_at: job.started_at,
            finished_at: job.finished_at,
            canceled_at: job.canceled_at,
            credits_held: amount(job.credits_held)?,
            credits_actual: job.credits_actual.map(amount).transpose()?,
            input: json(&job.input)?,
            upstream: job.upstream.as_ref().map(json).transpose()?,
            submit_attempted: job.submit_attempted,
            next_poll_at: job.next_poll_at,
            poll_failures: i32::try_from(job.poll_failures).unwrap_or(i32::MAX),
            version: i64::try_from(job.version).unwrap_or(i64::MAX),
            lease_until: None,
        })
    }

    pub(crate) fn into_job(self) -> Result<Job, StoreError> {
        let state: JobState = from_json("state", Value::String(self.state))?;
        Ok(Job {
            id: JobId::from_uuid(self.id),
            user_id: UserId::from_uuid(self.user_id),
            model: ModelId::new(self.model),
            modality: Modality::parse(&self.modality).ok_or_else(|| corrupt("modality", &self.modality))?,
            state,
            progress: u8::try_from(self.progress).map_err(|e| corrupt("progress", e))?,
            outputs: self.outputs.map(|v| from_json("outputs", v)).transpose()?,
            error: self.error.map(|v| from_json("error", v)).transpose()?,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            canceled_at: self.canceled_at,
            credits_held: credits(self.credits_held)?,
            credits_actual: self.credits_actual.map(credits).transpose()?,
            input: from_json("input", self.input)?,
            upstream: self.upstream.map(|v| from_json("upstream", v)).transpose()?,
            submit_attempted: self.submit_attempted,
            next_poll_at: self.next_poll_at,
            poll_failures: u32::try_from(self.poll_failures).unwrap_or(0),
            version: u64::try_from(self.version).map_err(|e| corrupt("version", e))?,
        })
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
