//! A job's state with the data that exists in that state and no other: outputs only once
//! succeeded, an error only once failed or canceled, the provider's reference only once sent.

use time::OffsetDateTime;

use super::{JobError, JobState, UpstreamRef};
use crate::credits::Credits;
use crate::output::OutputItem;

/// Where a job is in its life, with what it has there. [`JobState`] names it as the API shows
/// it: the first three phases are all `queued` to a client.
#[derive(Debug, Clone, PartialEq)]
pub enum JobPhase {
    /// Accepted and not yet sent to the provider (or surely not received by it).
    Accepted,
    /// Accepted and not sent: every key of its provider has its cap of jobs in flight, or others
    /// come first, so it waits for a slot. Nothing of it is at the provider.
    WaitingForCapacity,
    /// Being sent, or sent without a recorded answer: the provider may have it, so it is never
    /// sent again.
    Sending,
    /// The provider took it and it waits in the provider's queue.
    Queued {
        /// Where it lives at the provider.
        upstream: UpstreamRef,
        /// How many requests are ahead of it there, when the provider says.
        position: Option<u32>,
    },
    /// Running at the provider.
    Running {
        /// Where it lives at the provider.
        upstream: UpstreamRef,
        /// When the provider was first seen running it.
        started_at: OffsetDateTime,
        /// 0 to [`super::MAX_RUNNING_PROGRESS`], never decreasing.
        progress: u8,
    },
    /// Final: outputs delivered and charged.
    Succeeded {
        /// Where it lived at the provider.
        upstream: UpstreamRef,
        /// When it started running (its end, when no poll ever saw it running).
        started_at: OffsetDateTime,
        /// When it became final.
        finished_at: OffsetDateTime,
        /// What was delivered.
        outputs: Vec<OutputItem>,
        /// What it cost: never more than was held.
        credits_actual: Credits,
    },
    /// Final: the provider failed, refused, or took too long; nothing is charged.
    Failed {
        /// How far it had got.
        reached: Reached,
        /// When it became final.
        finished_at: OffsetDateTime,
        /// Why.
        error: JobError,
    },
    /// Final: canceled by its owner; nothing is charged.
    Canceled {
        /// How far it had got.
        reached: Reached,
        /// When it was canceled, which is when it became final.
        canceled_at: OffsetDateTime,
        /// The cancellation, as the API shows it.
        error: JobError,
    },
}

/// How far a job that ended without outputs had got.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    /// Whether it reached the provider.
    pub submission: Submission,
    /// When it started running, if it did.
    pub started_at: Option<OffsetDateTime>,
    /// Its last progress: at most [`super::MAX_RUNNING_PROGRESS`].
    pub progress: u8,
}

/// Whether a job reached its provider.
#[derive(Debug, Clone, PartialEq)]
pub enum Submission {
    /// It was never sent.
    NotSent,
    /// It was sent and no answer was recorded: the provider may have it.
    Attempted,
    /// The provider took it; where it lives there.
    Sent(UpstreamRef),
}

impl Submission {
    /// The provider's reference, once sent.
    #[must_use]
    pub fn upstream(&self) -> Option<&UpstreamRef> {
        match self {
            Submission::Sent(upstream) => Some(upstream),
            Submission::NotSent | Submission::Attempted => None,
        }
    }

    /// Whether the job may exist at the provider.
    #[must_use]
    pub fn was_attempted(&self) -> bool {
        !matches!(self, Submission::NotSent)
    }
}

impl JobPhase {
    /// The state the API names this phase by.
    #[must_use]
    pub fn state(&self) -> JobState {
        match self {
            JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Sending | JobPhase::Queued { .. } => {
                JobState::Queued
            }
            JobPhase::Running { .. } => JobState::Running,
            JobPhase::Succeeded { .. } => JobState::Succeeded,
            JobPhase::Failed { .. } => JobState::Failed,
            JobPhase::Canceled { .. } => JobState::Canceled,
        }
    }

    /// How far a job in this phase has got, were it to end now without outputs. Only
    /// [`super::Job::apply`] asks, and never of a final job.
    pub(super) fn reached(&self) -> Reached {
        match self {
            JobPhase::Accepted | JobPhase::WaitingForCapacity => {
                Reached { submission: Submission::NotSent, started_at: None, progress: 0 }
            }
            JobPhase::Sending => Reached { submission: Submission::Attempted, started_at: None, progress: 0 },
            JobPhase::Queued { upstream, .. } => {
                Reached { submission: Submission::Sent(upstream.clone()), started_at: None, progress: 0 }
            }
            JobPhase::Running { upstream, started_at, progress } => Reached {
                submission: Submission::Sent(upstream.clone()),
                started_at: Some(*started_at),
                progress: *progress,
            },
            JobPhase::Succeeded { upstream, started_at, .. } => Reached {
                submission: Submission::Sent(upstream.clone()),
                started_at: Some(*started_at),
                progress: super::MAX_RUNNING_PROGRESS,
            },
            JobPhase::Failed { reached, .. } | JobPhase::Canceled { reached, .. } => reached.clone(),
        }
    }

    /// The provider's reference, once sent.
    #[must_use]
    pub fn upstream(&self) -> Option<&UpstreamRef> {
        match self {
            JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Sending => None,
            JobPhase::Queued { upstream, .. }
            | JobPhase::Running { upstream, .. }
            | JobPhase::Succeeded { upstream, .. } => Some(upstream),
            JobPhase::Failed { reached, .. } | JobPhase::Canceled { reached, .. } => reached.submission.upstream(),
        }
    }

    /// 0 to 100; 100 only on success.
    #[must_use]
    pub fn progress(&self) -> u8 {
        match self {
            JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Sending | JobPhase::Queued { .. } => 0,
            JobPhase::Running { progress, .. } => *progress,
            JobPhase::Succeeded { .. } => 100,
            JobPhase::Failed { reached, .. } | JobPhase::Canceled { reached, .. } => reached.progress,
        }
    }

    /// When it became final.
    #[must_use]
    pub fn finished_at(&self) -> Option<OffsetDateTime> {
        match self {
            JobPhase::Succeeded { finished_at, .. } | JobPhase::Failed { finished_at, .. } => Some(*finished_at),
            JobPhase::Canceled { canceled_at, .. } => Some(*canceled_at),
            _ => None,
        }
    }

    /// What it cost, once final: nothing unless it succeeded.
    #[must_use]
    pub fn credits_actual(&self) -> Option<Credits> {
        match self {
            JobPhase::Succeeded { credits_actual, .. } => Some(*credits_actual),
            JobPhase::Failed { .. } | JobPhase::Canceled { .. } => Some(Credits::ZERO),
            _ => None,
        }
    }
}
