//! A job and its state machine. Every change to a job is a [`Transition`] computed here, as pure
//! code, and committed by a store with compare-and-set on [`Job::version`] together with the credit
//! movement it implies, so that a final state is reached exactly once and credits move exactly once.
//!
//! A job's fields are private: only [`Job::accept`] creates one, only [`Job::apply`] changes one,
//! and adapters that keep jobs bring them back with [`Job::restore`], which refuses a record that
//! breaks the job's invariants. So no caller can fabricate a settlement.
//!
//! The states a trigger leads to are one table, [`next_state`]; [`Job::apply`] adds the guards
//! about submission (a job is submitted once, and only a submitted job takes the provider's
//! answers) and computes everything else that changes.

mod error;
mod record;
mod state;
#[cfg(test)]
mod tests;
mod transition;

use time::OffsetDateTime;

pub use error::{JobError, JobErrorCode, UpstreamRef};
pub use record::{CorruptJob, JobRecord};
pub use state::{JobState, Trigger, TriggerKind, next_state};
pub use transition::{Transition, TransitionError};

use crate::catalog::Rate;
use crate::credits::{CreditMovement, Credits};
use crate::ids::{JobId, ModelId, UserId};
use crate::input::GenerationInput;
use crate::modality::Modality;
use crate::output::OutputItem;

/// A generation job. Read it through its accessors; change it only through [`Job::apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    record: JobRecord,
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
        let record = JobRecord {
            id,
            user_id,
            model,
            modality,
            state: JobState::Queued,
            progress: 0,
            outputs: None,
            error: None,
            created_at: now,
            started_at: None,
            finished_at: None,
            canceled_at: None,
            credits_held,
            credits_actual: None,
            rate,
            input,
            upstream: None,
            queue_position: None,
            webhook_url: None,
            submit_attempted: false,
            next_poll_at: Some(now),
            poll_failures: 0,
            version: 0,
        };
        (Job { record }, CreditMovement::Hold(credits_held))
    }

    /// Brings back a job an adapter kept, checking what must hold of every job: outputs only
    /// on success, an error only on failure or cancel, a charge and an end time exactly when
    /// final, a charge no more than the hold, progress 100 only on success.
    ///
    /// # Errors
    /// [`CorruptJob`] naming the first broken invariant.
    pub fn restore(record: JobRecord) -> Result<Job, CorruptJob> {
        let state = record.state;
        let broken = [
            (record.outputs.is_some() != (state == JobState::Succeeded), "outputs exist exactly when succeeded"),
            (
                record.error.is_some() != matches!(state, JobState::Failed | JobState::Canceled),
                "an error exists exactly when failed or canceled",
            ),
            (record.credits_actual.is_some() != state.is_final(), "credits_actual is set exactly when final"),
            (record.finished_at.is_some() != state.is_final(), "finished_at is set exactly when final"),
            (record.credits_actual.is_some_and(|a| a > record.credits_held), "credits_actual exceeds credits_held"),
            (record.progress > 100 || (record.progress == 100) != (state == JobState::Succeeded), "progress"),
            (record.queue_position.is_some() && state != JobState::Queued, "a queue position only while queued"),
        ];
        match broken.into_iter().find(|(is_broken, _)| *is_broken) {
            Some((_, problem)) => Err(CorruptJob { id: record.id, problem }),
            None => Ok(Job { record }),
        }
    }

    /// The same newly accepted job, its end to be posted to `url`.
    #[must_use]
    pub fn with_webhook_url(mut self, url: Option<String>) -> Self {
        self.record.webhook_url = url;
        self
    }

    /// Where its end is posted, when the client asked.
    #[must_use]
    pub fn webhook_url(&self) -> Option<&str> {
        self.record.webhook_url.as_deref()
    }

    /// Every field, for an adapter to write.
    #[must_use]
    pub fn record(&self) -> &JobRecord {
        &self.record
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

    /// Where it is in its life.
    #[must_use]
    pub fn state(&self) -> JobState {
        self.record.state
    }

    /// 0 to 100, never decreasing; 100 only on success.
    #[must_use]
    pub fn progress(&self) -> u8 {
        self.record.progress
    }

    /// Outputs, once succeeded.
    #[must_use]
    pub fn outputs(&self) -> Option<&[OutputItem]> {
        self.record.outputs.as_deref()
    }

    /// Why it failed or was canceled.
    #[must_use]
    pub fn error(&self) -> Option<&JobError> {
        self.record.error.as_ref()
    }

    /// Acceptance time.
    #[must_use]
    pub fn created_at(&self) -> OffsetDateTime {
        self.record.created_at
    }

    /// When the provider started running it.
    #[must_use]
    pub fn started_at(&self) -> Option<OffsetDateTime> {
        self.record.started_at
    }

    /// When it became final.
    #[must_use]
    pub fn finished_at(&self) -> Option<OffsetDateTime> {
        self.record.finished_at
    }

    /// When it was canceled.
    #[must_use]
    pub fn canceled_at(&self) -> Option<OffsetDateTime> {
        self.record.canceled_at
    }

    /// Credits held at acceptance: the most it can cost.
    #[must_use]
    pub fn credits_held(&self) -> Credits {
        self.record.credits_held
    }

    /// Credits charged, once final.
    #[must_use]
    pub fn credits_actual(&self) -> Option<Credits> {
        self.record.credits_actual
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
        self.record.upstream.as_ref()
    }

    /// How many requests are ahead of it in the provider's queue, while it waits there and the
    /// provider says.
    #[must_use]
    pub fn queue_position(&self) -> Option<u32> {
        self.record.queue_position
    }

    /// Whether a submission was started: with no [`Job::upstream`], the job may exist at the
    /// provider, so it is never submitted again.
    #[must_use]
    pub fn submit_attempted(&self) -> bool {
        self.record.submit_attempted
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

    /// Incremented by every committed transition; the compare-and-set token.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.record.version
    }

    /// The transition `trigger` causes at `now`.
    ///
    /// ```
    /// use genjobs_domain::catalog::{Rate, Unit};
    /// use genjobs_domain::credits::{CreditMovement, Credits};
    /// use genjobs_domain::ids::{JobId, ModelId, UserId};
    /// use genjobs_domain::input::GenerationInput;
    /// use genjobs_domain::job::{Job, JobState, Trigger};
    /// use genjobs_domain::modality::Modality;
    ///
    /// let now = time::OffsetDateTime::now_utc();
    /// let input = GenerationInput {
    ///     prompt: "a fox".into(),
    ///     negative_prompt: None,
    ///     aspect_ratio: "1:1".into(),
    ///     resolution: None,
    ///     duration_sec: None,
    ///     n: Some(1),
    ///     seed: None,
    ///     image_inputs: vec![],
    ///     extra: None,
    /// };
    /// let (job, hold) = Job::accept(
    ///     JobId::new_at(now),
    ///     UserId::new_at(now),
    ///     ModelId::new("nano-banana"),
    ///     Modality::Image,
    ///     input,
    ///     Rate { per: Unit::Image, credits: 4 },
    ///     now,
    /// );
    /// assert_eq!(hold, CreditMovement::Hold(Credits::new(4)));
    ///
    /// // A cancel releases everything held; a store commits it only if the version still matches.
    /// let cancel = job.apply(Trigger::Cancel, now)?;
    /// assert_eq!(cancel.job().state(), JobState::Canceled);
    /// assert_eq!(cancel.movement(), Some(CreditMovement::Release(Credits::new(4))));
    /// assert_eq!(cancel.expected_version(), job.version());
    ///
    /// // A final job takes no trigger: a late provider result cannot charge it.
    /// assert!(cancel.job().apply(Trigger::Cancel, now).is_err());
    /// # Ok::<(), genjobs_domain::job::TransitionError>(())
    /// ```
    ///
    /// # Errors
    /// [`TransitionError::AlreadyFinal`] for any trigger on a final job;
    /// [`TransitionError::NotApplicable`] where [`next_state`] has no entry, and for a provider
    /// event that does not fit: a submission of a job already submitted, or a poll result of a
    /// job not submitted.
    pub fn apply(&self, trigger: Trigger, now: OffsetDateTime) -> Result<Transition, TransitionError> {
        let current = &self.record;
        if current.state.is_final() {
            return Err(TransitionError::AlreadyFinal(current.state));
        }
        let kind = trigger.kind();
        let not_applicable = TransitionError::NotApplicable { state: current.state, trigger: kind.name() };
        let state = next_state(current.state, kind).ok_or_else(|| not_applicable.clone())?;
        let (submitted, attempted) = (current.upstream.is_some(), current.submit_attempted);
        let guard_holds = match kind {
            TriggerKind::SubmitStarted => !submitted && !attempted,
            TriggerKind::Submitted | TriggerKind::SubmitNotReached => !submitted && attempted,
            TriggerKind::UpstreamQueued | TriggerKind::UpstreamRunning | TriggerKind::Succeeded => submitted,
            TriggerKind::UpstreamUnreachable | TriggerKind::Failed | TriggerKind::Cancel => true,
        };
        if !guard_holds {
            return Err(not_applicable);
        }
        let mut next = current.clone();
        next.state = state;
        // Only the provider's queue report keeps a position; any other news means it moved on.
        next.queue_position = None;
        next.version = current.version + 1;
        let mut movement = None;
        match trigger {
            Trigger::SubmitStarted { next_poll_at } => {
                next.submit_attempted = true;
                next.next_poll_at = Some(next_poll_at);
            }
            Trigger::Submitted { upstream, next_poll_at } => {
                next.upstream = Some(upstream);
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = 0;
            }
            Trigger::SubmitNotReached { next_poll_at } => {
                next.submit_attempted = false;
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = current.poll_failures.saturating_add(1);
            }
            Trigger::UpstreamQueued { position, next_poll_at } => {
                next.queue_position = position;
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = 0;
            }
            Trigger::UpstreamRunning { progress, next_poll_at } => {
                next.started_at = current.started_at.or(Some(now));
                next.progress = current.progress.max(progress.min(MAX_RUNNING_PROGRESS));
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = 0;
            }
            Trigger::UpstreamUnreachable { next_poll_at } => {
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = current.poll_failures.saturating_add(1);
            }
            Trigger::Succeeded { outputs, credits_actual } => {
                let actual = credits_actual.min(current.credits_held);
                next.progress = 100;
                next.outputs = Some(outputs);
                next.started_at = current.started_at.or(Some(now));
                next.credits_actual = Some(actual);
                movement = Some(CreditMovement::Settle { held: current.credits_held, actual });
                finish(&mut next, now);
            }
            Trigger::Failed { error } => {
                next.error = Some(error);
                next.credits_actual = Some(Credits::ZERO);
                movement = Some(CreditMovement::Release(current.credits_held));
                finish(&mut next, now);
            }
            Trigger::Cancel => {
                next.error = Some(JobError::new(JobErrorCode::JobCanceled, "the job was canceled by its owner"));
                next.credits_actual = Some(Credits::ZERO);
                next.canceled_at = Some(now);
                movement = Some(CreditMovement::Release(current.credits_held));
                finish(&mut next, now);
            }
        }
        let recomputable = matches!(
            kind,
            TriggerKind::UpstreamQueued | TriggerKind::UpstreamRunning | TriggerKind::UpstreamUnreachable
        );
        Ok(Transition {
            job: Job { record: next },
            expected_version: current.version,
            movement,
            from: current.state,
            recomputable,
        })
    }

    /// Whether `other` shows a client the same job: everything but the schedule (next poll,
    /// failure count) and the version. A poll that changes nothing else need not be written.
    #[must_use]
    pub fn same_observable_state(&self, other: &Job) -> bool {
        let (a, b) = (&self.record, &other.record);
        a.state == b.state
            && a.progress == b.progress
            && a.started_at == b.started_at
            && a.finished_at == b.finished_at
            && a.canceled_at == b.canceled_at
            && a.outputs == b.outputs
            && a.error == b.error
            && a.credits_actual == b.credits_actual
            && a.upstream == b.upstream
            && a.queue_position == b.queue_position
            && a.submit_attempted == b.submit_attempted
    }
}

fn finish(record: &mut JobRecord, now: OffsetDateTime) {
    record.finished_at = Some(now);
    record.next_poll_at = None;
}
