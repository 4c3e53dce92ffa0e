//! What an adapter keeps of a job, to bring it back with [`Job::restore`](super::Job::restore),
//! and the error of a kept job that breaks a job's invariants.

use time::OffsetDateTime;

use super::{BatchPlace, JobPhase};
use crate::capacity::Priority;
use crate::catalog::{Billing, ProviderBill, Rate};
use crate::credits::Credits;
use crate::ids::{JobId, KeyPrefix, ModelId, UserId};
use crate::input::GenerationInput;
use crate::modality::Modality;
use crate::moderation::Moderation;
use crate::request::ReceivedRequest;
use crate::routing::RoutePreference;
use crate::trace::TraceParent;

/// A job as an adapter kept it: the facts fixed at acceptance, its [`JobPhase`] (which an
/// adapter maps to and from its own storage), and the driver's schedule.
/// [`Job::restore`](super::Job::restore) checks it; [`Job::to_stored`](super::Job::to_stored)
/// gives it back for writing.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredJob {
    /// Its id.
    pub id: JobId,
    /// Its owner.
    pub user_id: UserId,
    /// The prefix of the key it was submitted with; `None` for jobs older than keys' budgets.
    pub key_prefix: Option<KeyPrefix>,
    /// The model in effect.
    pub model: ModelId,
    /// `video` or `image`.
    pub modality: Modality,
    /// Acceptance time.
    pub created_at: OffsetDateTime,
    /// Credits held at acceptance: the most it can cost.
    pub credits_held: Credits,
    /// What a unit of its output costs, fixed at acceptance: a later price change moves
    /// neither its hold nor its charge.
    pub rate: Rate,
    /// The validated request.
    pub input: GenerationInput,
    /// Where its end is posted ([`crate::client_webhooks`]), when the client asked.
    pub webhook_url: Option<String>,
    /// The request body as received, no default filled in; `None` for a job accepted before
    /// bodies were kept.
    pub request: Option<ReceivedRequest>,
    /// How soon it goes to its provider when slots are scarce.
    pub priority: Priority,
    /// When it must have started running at its provider, or fail `DEADLINE_EXCEEDED`; `None`
    /// when the client set no such deadline.
    pub start_by: Option<OffsetDateTime>,
    /// Which of its model's routes it may take, and how it chooses among them when sent.
    pub routing: RoutePreference,
    /// The trace its submission started, which every step of it continues; `None` without
    /// traces.
    pub trace: Option<TraceParent>,
    /// What its moderation check found; `None` while unchecked, and for jobs not checked at all
    /// (moderation off, or a model that skips it).
    pub moderation: Option<Moderation>,
    /// Its place in a batch, for a batch's item.
    pub batch: Option<BatchPlace>,
    /// Its state and that state's data.
    pub phase: JobPhase,
    /// When its provider took it: the job timeout counts from then. `None` until sent (and for
    /// jobs sent before this was kept).
    pub sent_at: Option<OffsetDateTime>,
    /// When the driver next looks at it; `None` once final.
    pub next_poll_at: Option<OffsetDateTime>,
    /// Consecutive transient failures talking to the provider, for back-off.
    pub poll_failures: u32,
    /// What its route costs the operator, from its submission on; `None` for a route with no
    /// cost (and for jobs sent before costs were kept).
    pub billing: Option<Billing>,
    /// What it cost the operator at its provider, once final and when it has a `billing`.
    pub bill: Option<ProviderBill>,
    /// Incremented by every committed transition; the compare-and-set token.
    pub version: u64,
}

/// A kept job that breaks a job's invariants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {id} cannot be restored: {problem}")]
pub struct CorruptJob {
    /// The job.
    pub id: JobId,
    /// The broken invariant.
    pub problem: &'static str,
}
