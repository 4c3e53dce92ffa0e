//! The states of a job, the triggers that move it, and the table of where each trigger leads.

use time::OffsetDateTime;

use super::JobError;
use super::UpstreamRef;
use crate::catalog::Billing;
use crate::credits::Credits;
use crate::decimal::Decimal;
use crate::moderation::Moderation;
use crate::output::OutputItem;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Accepted, waiting at the provider.
    Queued,
    /// Running at the provider.
    Running,
    /// Final: outputs delivered.
    Succeeded,
    /// Final: the provider failed, refused, or took too long.
    Failed,
    /// Final: canceled by its owner.
    Canceled,
}

impl JobState {
    /// Every state, for exhaustive tests.
    pub const ALL: [JobState; 5] =
        [JobState::Queued, JobState::Running, JobState::Succeeded, JobState::Failed, JobState::Canceled];

    /// Whether the job can change no more.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Canceled)
    }

    /// The lowercase name used in the API.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Canceled => "canceled",
        }
    }

    /// Parses [`JobState::as_str`].
    #[must_use]
    pub fn parse(text: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// What happens to a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// The driver is about to send the job to the provider.
    SubmitStarted {
        /// When another driver may look at the job if this one never records the outcome; it
        /// will then fail the job rather than submit it again.
        next_poll_at: OffsetDateTime,
    },
    /// A batch item is admitted to be sent: from now on it counts against its owner's
    /// concurrent-job limit. A store commits it only while the owner is under that limit.
    Admitted,
    /// The moderation service's check let the job be sent (or, failing open, it goes unchecked).
    Moderated {
        /// [`Moderation::Passed`] or [`Moderation::Unchecked`].
        outcome: Moderation,
    },
    /// The moderation check refused the job (or could not be had in time): it fails unsent.
    ModerationRefused {
        /// [`Moderation::Flagged`] or [`Moderation::Unavailable`].
        outcome: Moderation,
        /// `CONTENT_REFUSED` or `MODERATION_UNAVAILABLE`.
        error: JobError,
    },
    /// The moderation service gave no answer; the check is tried again, nothing was sent.
    ModerationDelayed {
        /// When to check again.
        next_poll_at: OffsetDateTime,
    },
    /// The provider accepted the job.
    Submitted {
        /// Where the job lives there.
        upstream: UpstreamRef,
        /// When to poll it first.
        next_poll_at: OffsetDateTime,
        /// What its route costs the operator, when the catalog says: kept for its bill.
        billing: Option<Billing>,
    },
    /// The submission surely did not reach the provider; it may be sent again later.
    SubmitNotReached {
        /// When to try again.
        next_poll_at: OffsetDateTime,
    },
    /// Not sent: no key of its provider has room for it now (or others come first).
    AwaitCapacity {
        /// When to look for a slot again, unless a slot freeing wakes it first.
        next_poll_at: OffsetDateTime,
    },
    /// The provider reports the job waiting in its queue.
    UpstreamQueued {
        /// How many requests are ahead of it at the provider, when the provider says.
        position: Option<u32>,
        /// When to poll next.
        next_poll_at: OffsetDateTime,
    },
    /// The provider reports the job running.
    UpstreamRunning {
        /// Progress estimate, 0 to 100; capped below 100 and never lowered.
        progress: u8,
        /// When to poll next.
        next_poll_at: OffsetDateTime,
    },
    /// Talking to the provider failed in a way worth retrying.
    UpstreamUnreachable {
        /// When to try again.
        next_poll_at: OffsetDateTime,
    },
    /// Outputs delivered.
    Succeeded {
        /// What was delivered.
        outputs: Vec<OutputItem>,
        /// What it costs; capped at what was held.
        credits_actual: Credits,
        /// The units the provider reported billing, when it did.
        reported_units: Option<Decimal>,
    },
    /// The provider failed, refused, or the job timed out.
    Failed {
        /// Why.
        error: JobError,
        /// The units the provider reported billing all the same, when it did.
        reported_units: Option<Decimal>,
    },
    /// The owner canceled it.
    Cancel,
}

/// A trigger without its data: the column of the state table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TriggerKind {
    /// [`Trigger::SubmitStarted`].
    SubmitStarted,
    /// [`Trigger::Admitted`].
    Admitted,
    /// [`Trigger::Moderated`].
    Moderated,
    /// [`Trigger::ModerationDelayed`].
    ModerationDelayed,
    /// [`Trigger::ModerationRefused`].
    ModerationRefused,
    /// [`Trigger::Submitted`].
    Submitted,
    /// [`Trigger::SubmitNotReached`].
    SubmitNotReached,
    /// [`Trigger::AwaitCapacity`].
    AwaitCapacity,
    /// [`Trigger::UpstreamQueued`].
    UpstreamQueued,
    /// [`Trigger::UpstreamRunning`].
    UpstreamRunning,
    /// [`Trigger::UpstreamUnreachable`].
    UpstreamUnreachable,
    /// [`Trigger::Succeeded`].
    Succeeded,
    /// [`Trigger::Failed`].
    Failed,
    /// [`Trigger::Cancel`].
    Cancel,
}

impl TriggerKind {
    /// Every kind, for exhaustive tests.
    pub const ALL: [TriggerKind; 14] = [
        TriggerKind::SubmitStarted,
        TriggerKind::Admitted,
        TriggerKind::Moderated,
        TriggerKind::ModerationDelayed,
        TriggerKind::ModerationRefused,
        TriggerKind::Submitted,
        TriggerKind::SubmitNotReached,
        TriggerKind::AwaitCapacity,
        TriggerKind::UpstreamQueued,
        TriggerKind::UpstreamRunning,
        TriggerKind::UpstreamUnreachable,
        TriggerKind::Succeeded,
        TriggerKind::Failed,
        TriggerKind::Cancel,
    ];

    /// A short name for logs.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            TriggerKind::SubmitStarted => "submit_started",
            TriggerKind::Admitted => "admitted",
            TriggerKind::Moderated => "moderated",
            TriggerKind::ModerationDelayed => "moderation_delayed",
            TriggerKind::ModerationRefused => "moderation_refused",
            TriggerKind::Submitted => "submitted",
            TriggerKind::SubmitNotReached => "submit_not_reached",
            TriggerKind::AwaitCapacity => "await_capacity",
            TriggerKind::UpstreamQueued => "upstream_queued",
            TriggerKind::UpstreamRunning => "upstream_running",
            TriggerKind::UpstreamUnreachable => "upstream_unreachable",
            TriggerKind::Succeeded => "succeeded",
            TriggerKind::Failed => "failed",
            TriggerKind::Cancel => "cancel",
        }
    }
}

impl Trigger {
    /// The job fails with `error`, its provider having reported no billing for it.
    #[must_use]
    pub fn failed(error: JobError) -> Trigger {
        Trigger::Failed { error, reported_units: None }
    }

    /// Which trigger this is.
    #[must_use]
    pub fn kind(&self) -> TriggerKind {
        match self {
            Trigger::SubmitStarted { .. } => TriggerKind::SubmitStarted,
            Trigger::Admitted => TriggerKind::Admitted,
            Trigger::Moderated { .. } => TriggerKind::Moderated,
            Trigger::ModerationDelayed { .. } => TriggerKind::ModerationDelayed,
            Trigger::ModerationRefused { .. } => TriggerKind::ModerationRefused,
            Trigger::Submitted { .. } => TriggerKind::Submitted,
            Trigger::SubmitNotReached { .. } => TriggerKind::SubmitNotReached,
            Trigger::AwaitCapacity { .. } => TriggerKind::AwaitCapacity,
            Trigger::UpstreamQueued { .. } => TriggerKind::UpstreamQueued,
            Trigger::UpstreamRunning { .. } => TriggerKind::UpstreamRunning,
            Trigger::UpstreamUnreachable { .. } => TriggerKind::UpstreamUnreachable,
            Trigger::Succeeded { .. } => TriggerKind::Succeeded,
            Trigger::Failed { .. } => TriggerKind::Failed,
            Trigger::Cancel => TriggerKind::Cancel,
        }
    }

    /// A short name for logs and tests.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
}

/// The state machine as one table: the state a trigger leads to from `from`, or `None` where the
/// trigger does not apply. Final states take no trigger. [`Job::apply`](super::Job::apply) adds the submission
/// guards: `SubmitStarted` only once, `Submitted` and `SubmitNotReached` only after it, and the
/// provider's answers (`UpstreamQueued`, `UpstreamRunning`, `Succeeded`) only once submitted.
#[must_use]
pub fn next_state(from: JobState, trigger: TriggerKind) -> Option<JobState> {
    use JobState::{Canceled, Failed, Queued, Running, Succeeded};
    use TriggerKind as T;
    match (from, trigger) {
        (Succeeded | Failed | Canceled, _) => None,
        (Queued, T::SubmitStarted | T::Submitted | T::SubmitNotReached | T::AwaitCapacity) => Some(Queued),
        (Queued, T::Moderated | T::ModerationDelayed | T::Admitted) => Some(Queued),
        (Queued, T::ModerationRefused) => Some(Failed),
        (Running, T::SubmitStarted | T::Submitted | T::SubmitNotReached | T::AwaitCapacity) => None,
        (Running, T::Moderated | T::ModerationDelayed | T::ModerationRefused | T::Admitted) => None,
        (state, T::UpstreamQueued | T::UpstreamUnreachable) => Some(state),
        (_, T::UpstreamRunning) => Some(Running),
        (_, T::Succeeded) => Some(Succeeded),
        (_, T::Failed) => Some(Failed),
        (_, T::Cancel) => Some(Canceled),
    }
}
