//! A job's every field as an adapter keeps it, and the error of a record that breaks a job's
//! invariants.

use time::OffsetDateTime;

use super::{JobError, JobState, UpstreamRef};
use crate::catalog::Rate;
use crate::credits::Credits;
use crate::ids::{JobId, ModelId, UserId};
use crate::input::GenerationInput;
use crate::modality::Modality;
use crate::output::OutputItem;

/// Every field of a job, as an adapter keeps it. [`Job::restore`](super::Job::restore) turns a record back into a job
/// after checking it; [`Job::record`](super::Job::record) shows a job's record for writing.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    /// Its id.
    pub id: JobId,
    /// Its owner.
    pub user_id: UserId,
    /// The model in effect.
    pub model: ModelId,
    /// `video` or `image`.
    pub modality: Modality,
    /// Where it is in its life.
    pub state: JobState,
    /// 0 to 100, never decreasing; 100 only on success.
    pub progress: u8,
    /// Outputs, once succeeded.
    pub outputs: Option<Vec<OutputItem>>,
    /// Why it failed or was canceled.
    pub error: Option<JobError>,
    /// Acceptance time.
    pub created_at: OffsetDateTime,
    /// When the provider started running it.
    pub started_at: Option<OffsetDateTime>,
    /// When it became final.
    pub finished_at: Option<OffsetDateTime>,
    /// When it was canceled.
    pub canceled_at: Option<OffsetDateTime>,
    /// Credits held at acceptance: the most it can cost.
    pub credits_held: Credits,
    /// Credits charged, once final.
    pub credits_actual: Option<Credits>,
    /// What a unit of its output costs, fixed at acceptance: a later price change moves
    /// neither its hold nor its charge.
    pub rate: Rate,
    /// The validated request.
    pub input: GenerationInput,
    /// Where it lives at the provider, once submitted.
    pub upstream: Option<UpstreamRef>,
    /// How many requests are ahead of it in the provider's queue, while it waits there and the
    /// provider says.
    pub queue_position: Option<u32>,
    /// Where its end is posted ([`crate::webhooks`]), when the client asked.
    pub webhook_url: Option<String>,
    /// Set before a submission is sent: a job found with this set and no `upstream` may already
    /// exist at the provider, so it is never submitted again.
    pub submit_attempted: bool,
    /// When the driver next looks at it; `None` once final.
    pub next_poll_at: Option<OffsetDateTime>,
    /// Consecutive transient failures talking to the provider, for back-off.
    pub poll_failures: u32,
    /// Incremented by every committed transition; the compare-and-set token.
    pub version: u64,
}

/// A stored job record that breaks a job's invariants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {id} cannot be restored: {problem}")]
pub struct CorruptJob {
    /// The job.
    pub id: JobId,
    /// The broken invariant.
    pub problem: &'static str,
}
