//! A job and its state machine. Every change to a job is a [`Transition`] computed here, as pure
//! code, and committed by a store with compare-and-set on [`Job::version`] together with the credit
//! movement it implies, so that a final state is reached exactly once and credits move exactly once.
//!
//! A job's state is a [`JobPhase`] that carries the data of that state and no other (outputs
//! only once succeeded, an error only once failed or canceled, the provider's reference only once
//! sent), so a job whose state and data disagree cannot be written down. A job's fields are
//! private: only [`Job::accept`] creates one, only [`Job::apply`] changes one, and adapters that
//! keep jobs bring them back with [`Job::restore`] from a [`StoredJob`], which refuses a charge
//! above the hold or a progress out of range. So no caller can fabricate a settlement.
//!
//! The states a trigger leads to are one table, [`next_state`]; [`Job::apply`] adds the guards
//! about submission (a job is submitted once, and only a submitted job takes the provider's
//! answers) and computes the next phase.

mod batch_place;
mod error;
mod phase;
mod state;
mod stored;
#[cfg(test)]
mod tests;
mod transition;
mod upstream;

use time::OffsetDateTime;

pub use batch_place::BatchPlace;
pub use error::{JobError, JobErrorCode};
pub use phase::{JobPhase, Reached, Submission};
pub use state::{JobState, Trigger, TriggerKind, next_state};
pub use stored::{CorruptJob, StoredJob};
pub use transition::{Transition, TransitionError};
pub use upstream::UpstreamRef;

use crate::capacity::Priority;
use crate::catalog::{Billing, ProviderBill, Rate};
use crate::credits::{CreditMovement, Credits};
use crate::ids::{JobId, KeyPrefix, ModelId, UserId};
use crate::input::GenerationInput;
use crate::modality::Modality;
use crate::moderation::Moderation;
use crate::output::OutputItem;
use crate::request::ReceivedRequest;
use crate::routing::RoutePreference;
use crate::trace::TraceParent;

/// A generation job. Read it through its accessors; change it only through [`Job::apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// What a store keeps of it; private, so that only this module's rules change it.
    record: StoredJob,
}

/// Highest progress before success.
pub const MAX_RUNNING_PROGRESS: u8 = 99;

impl Job {
    /// A newly accepted job, paying `rate` for what it delivers, and the hold it implies.
    #[must_use]
    pub fn accept(
        id: JobId,
        user_id: UserId,
        model: ModelId,
        modality: Modality,
        input: GenerationInput,
        rate: Rate,
        now: OffsetDateTime,
    ) -> (Job, CreditMovement) {
        let credits_held = rate.to_hold(&input);
        let job = Job {
            record: StoredJob {
                id,
                user_id,
                key_prefix: None,
                model,
                modality,
                created_at: now,
                credits_held,
                rate,
                input,
                webhook_url: None,
                request: None,
                priority: Priority::Normal,
                start_by: None,
                routing: RoutePreference::default(),
                trace: None,
                moderation: None,
                batch: None,
                phase: JobPhase::Accepted,
                sent_at: None,
                next_poll_at: Some(now),
                poll_failures: 0,
                billing: None,
                bill: None,
                version: 0,
            },
        };
        (job, CreditMovement::Hold(credits_held))
    }

    /// Brings back a job an adapter kept, checking what its phase cannot say by itself: a
    /// charge no more than the hold, progress below 100 until success, no next poll once final.
    ///
    /// # Errors
    /// [`CorruptJob`] naming the first broken invariant.
    pub fn restore(stored: StoredJob) -> Result<Job, CorruptJob> {
        let phase = &stored.phase;
        let broken = [
            (
                phase.credits_actual().is_some_and(|actual| actual > stored.credits_held),
                "credits_actual exceeds credits_held",
            ),
            (!matches!(phase, JobPhase::Succeeded { .. }) && phase.progress() > MAX_RUNNING_PROGRESS, "progress"),
            (phase.state().is_final() && stored.next_poll_at.is_some(), "a final job has no next poll"),
        ];
        if let Some((_, problem)) = broken.into_iter().find(|(is_broken, _)| *is_broken) {
            return Err(CorruptJob { id: stored.id, problem });
        }
        Ok(Job { record: stored })
    }

    /// Everything an adapter keeps, for writing; [`Job::restore`] brings it back.
    #[must_use]
    pub fn to_stored(&self) -> StoredJob {
        self.record.clone()
    }

    /// The same newly accepted job, its end to be posted to `url`.
    #[must_use]
    pub fn with_webhook_url(mut self, url: Option<String>) -> Self {
        self.record.webhook_url = url;
        self
    }

    /// The same newly accepted job, submitted with the key of `prefix`.
    #[must_use]
    pub fn with_key_prefix(mut self, prefix: Option<KeyPrefix>) -> Self {
        self.record.key_prefix = prefix;
        self
    }

    /// The prefix of the key it was submitted with, when known.
    #[must_use]
    pub fn key_prefix(&self) -> Option<&KeyPrefix> {
        self.record.key_prefix.as_ref()
    }

    /// The same newly accepted job, sent as `priority` says when slots are scarce.
    #[must_use]
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.record.priority = priority;
        self
    }

    /// How soon it goes to its provider when slots are scarce.
    #[must_use]
    pub fn priority(&self) -> Priority {
        self.record.priority
    }

    /// The same newly accepted job as an item of a batch, at `place`: it runs at `low` priority
    /// and counts against its owner's concurrent-job limit only once admitted. It rests until
    /// `parked_until` (its batch's window's end), unless woken when its owner has room
    /// ([`crate::ports::BatchStore::wake_admissible`]): a waiting item costs no claim, no step
    /// and no driver's memory however many wait.
    #[must_use]
    pub fn with_batch(mut self, place: BatchPlace, parked_until: OffsetDateTime) -> Self {
        self.record.batch = Some(place);
        self.record.priority = Priority::Low;
        self.record.next_poll_at = Some(parked_until);
        self
    }

    /// Its place in a batch, for a batch's item.
    #[must_use]
    pub fn batch(&self) -> Option<&BatchPlace> {
        self.record.batch.as_ref()
    }

    /// Whether it counts against its owner's concurrent-job limit (and in `active_jobs`): a job
    /// not final, unless it is a batch item not yet admitted to be sent.
    #[must_use]
    pub fn counts_as_active(&self) -> bool {
        !self.state().is_final() && self.record.batch.as_ref().is_none_or(|place| place.admitted)
    }

    /// Whether it is a batch item waiting to be admitted to be sent.
    #[must_use]
    pub fn awaits_admission(&self) -> bool {
        !self.state().is_final() && self.record.batch.as_ref().is_some_and(|place| !place.admitted)
    }

    /// The same newly accepted job, routed as `routing` prefers when it is sent.
    #[must_use]
    pub fn with_routing(mut self, routing: RoutePreference) -> Self {
        self.record.routing = routing;
        self
    }

    /// Which of its model's routes it may take, and how it chooses among them.
    #[must_use]
    pub fn routing(&self) -> &RoutePreference {
        &self.record.routing
    }

    /// The same newly accepted job, to fail `DEADLINE_EXCEEDED` unless it started running at its
    /// provider by `start_by`.
    #[must_use]
    pub fn with_start_by(mut self, start_by: Option<OffsetDateTime>) -> Self {
        self.record.start_by = start_by;
        self
    }

    /// When it must have started running at its provider, if its request said.
    #[must_use]
    pub fn start_by(&self) -> Option<OffsetDateTime> {
        self.record.start_by
    }

    /// Whether it has not started running at its provider (unsent, waiting for a slot, or in
    /// the provider's queue) and its start deadline has come at `now`.
    #[must_use]
    pub fn missed_its_start(&self, now: OffsetDateTime) -> bool {
        self.record.start_by.is_some_and(|start_by| now >= start_by) && self.awaits_start()
    }

    /// Whether it is yet to start running: a start deadline still applies to it. A job being
    /// sent is not, for its next poll time marks the send's end, not a look.
    fn awaits_start(&self) -> bool {
        matches!(self.record.phase, JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Queued { .. })
    }

    /// Where its end is posted, when the client asked.
    #[must_use]
    pub fn webhook_url(&self) -> Option<&str> {
        self.record.webhook_url.as_deref()
    }

    /// The same newly accepted job, keeping the body it was `received` with.
    #[must_use]
    pub fn with_request(mut self, received: ReceivedRequest) -> Self {
        self.record.request = Some(received);
        self
    }

    /// The same newly accepted job, going on with the trace its submission is part of.
    #[must_use]
    pub fn with_trace(mut self, trace: Option<TraceParent>) -> Self {
        self.record.trace = trace;
        self
    }

    /// The trace its submission started, when traces are on.
    #[must_use]
    pub fn trace(&self) -> Option<&TraceParent> {
        self.record.trace.as_ref()
    }

    /// The body it was received with, when kept.
    #[must_use]
    pub fn request(&self) -> Option<&ReceivedRequest> {
        self.record.request.as_ref()
    }

    /// What its moderation check found, once checked.
    #[must_use]
    pub fn moderation(&self) -> Option<Moderation> {
        self.record.moderation
    }

    /// Its id.
    #[must_use]
    pub fn id(&self) -> JobId {
        self.record.id
    }

    /// Its owner.
    #[must_use]
    pub fn user_id(&self) -> UserId {
        self.record.user_id
    }

    /// The model in effect.
    #[must_use]
    pub fn model(&self) -> &ModelId {
        &self.record.model
    }

    /// `video` or `image`.
    #[must_use]
    pub fn modality(&self) -> Modality {
        self.record.modality
    }

    /// Its state and that state's data.
    #[must_use]
    pub fn phase(&self) -> &JobPhase {
        &self.record.phase
    }

    /// Where it is in its life, as the API names it.
    #[must_use]
    pub fn state(&self) -> JobState {
        self.record.phase.state()
    }

    /// 0 to 100, never decreasing; 100 only on success.
    #[must_use]
    pub fn progress(&self) -> u8 {
        self.record.phase.progress()
    }

    /// Outputs, once succeeded.
    #[must_use]
    pub fn outputs(&self) -> Option<&[OutputItem]> {
        match &self.record.phase {
            JobPhase::Succeeded { outputs, .. } => Some(outputs),
            _ => None,
        }
    }

    /// Why it failed or was canceled.
    #[must_use]
    pub fn error(&self) -> Option<&JobError> {
        match &self.record.phase {
            JobPhase::Failed { error, .. } | JobPhase::Canceled { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Acceptance time.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.record.created_at
    }

    /// When the provider started running it.
    #[must_use]
    pub fn started_at(&self) -> Option<OffsetDateTime> {
        match &self.record.phase {
            JobPhase::Running { started_at, .. } | JobPhase::Succeeded { started_at, .. } => Some(*started_at),
            JobPhase::Failed { reached, .. } | JobPhase::Canceled { reached, .. } => reached.started_at,
            JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Sending | JobPhase::Queued { .. } => None,
        }
    }

    /// When it became final.
    #[must_use]
    pub fn finished_at(&self) -> Option<OffsetDateTime> {
        self.record.phase.finished_at()
    }

    /// When it was canceled.
    #[must_use]
    pub fn canceled_at(&self) -> Option<OffsetDateTime> {
        match &self.record.phase {
            JobPhase::Canceled { canceled_at, .. } => Some(*canceled_at),
            _ => None,
        }
    }

    /// Credits held at acceptance: the most it can cost.
    #[must_use]
    pub fn credits_held(&self) -> Credits {
        self.record.credits_held
    }

    /// Credits charged, once final.
    #[must_use]
    pub fn credits_actual(&self) -> Option<Credits> {
        self.record.phase.credits_actual()
    }

    /// What a unit of its output costs, as fixed at acceptance.
    #[must_use]
    pub fn rate(&self) -> Rate {
        self.record.rate
    }

    /// The validated request.
    #[must_use]
    pub fn input(&self) -> &GenerationInput {
        &self.record.input
    }

    /// Where it lives at the provider, once submitted.
    #[must_use]
    pub fn upstream(&self) -> Option<&UpstreamRef> {
        self.record.phase.upstream()
    }

    /// How many requests are ahead of it in the provider's queue, while it waits there and the
    /// provider says.
    #[must_use]
    pub fn queue_position(&self) -> Option<u32> {
        match &self.record.phase {
            JobPhase::Queued { position, .. } => *position,
            _ => None,
        }
    }

    /// Whether a submission was started: with no [`Job::upstream`], the job may exist at the
    /// provider, so it is never submitted again.
    #[must_use]
    pub fn submit_attempted(&self) -> bool {
        match &self.record.phase {
            JobPhase::Accepted | JobPhase::WaitingForCapacity => false,
            JobPhase::Failed { reached, .. } | JobPhase::Canceled { reached, .. } => reached.submission.was_attempted(),
            JobPhase::Sending | JobPhase::Queued { .. } | JobPhase::Running { .. } | JobPhase::Succeeded { .. } => true,
        }
    }

    /// When its provider took it, as far as kept: the job timeout counts from then.
    #[must_use]
    pub fn sent_at(&self) -> Option<OffsetDateTime> {
        self.record.sent_at
    }

    /// Whether it waits, unsent, for a slot of its provider's keys.
    #[must_use]
    pub fn waits_for_capacity(&self) -> bool {
        matches!(self.record.phase, JobPhase::WaitingForCapacity)
    }

    /// When the driver next looks at it; `None` once final.
    #[must_use]
    pub fn next_poll_at(&self) -> Option<OffsetDateTime> {
        self.record.next_poll_at
    }

    /// Consecutive transient failures talking to the provider.
    #[must_use]
    pub fn poll_failures(&self) -> u32 {
        self.record.poll_failures
    }

    /// What its route costs the operator, once sent on a route with a cost.
    #[must_use]
    pub fn billing(&self) -> Option<&Billing> {
        self.record.billing.as_ref()
    }

    /// What it cost the operator at its provider: once final, when sent on a route with a cost.
    #[must_use]
    pub fn provider_bill(&self) -> Option<&ProviderBill> {
        self.record.bill.as_ref()
    }

    /// Incremented by every committed transition; the compare-and-set token.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.record.version
    }

    /// Whether `other` shows a client the same job: everything but the schedule (next poll,
    /// failure count) and the version. A poll that changes nothing else need not be written.
    #[must_use]
    pub fn same_observable_state(&self, other: &Job) -> bool {
        self.record.phase == other.record.phase
    }
}
