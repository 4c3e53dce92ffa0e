//! A computed change to a job, ready for a store to commit with compare-and-set, and the rules
//! that compute it ([`Job::apply`]).

use time::OffsetDateTime;

use super::{Job, JobError, JobErrorCode, JobPhase, JobState, MAX_RUNNING_PROGRESS, Trigger, TriggerKind, next_state};
use crate::credits::CreditMovement;

/// A change to commit: the job after it, the version it must replace, and the credits it moves.
/// Only [`Job::apply`](super::Job::apply) makes one.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub(super) job: Job,
    pub(super) expected_version: u64,
    pub(super) movement: Option<CreditMovement>,
    pub(super) from: JobState,
    pub(super) recomputable: bool,
    pub(super) counted_before: bool,
}

impl Transition {
    /// The job as it will be, with its version already incremented.
    #[must_use]
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The job as it will be once committed.
    #[must_use]
    pub fn into_job(self) -> Job {
        self.job
    }

    /// The job with this change kept in memory only: its version stays the stored one, so that
    /// a later transition still matches the store. For changes [`Transition::is_recomputable`]
    /// that show a client nothing new.
    #[must_use]
    pub fn into_unwritten_job(self) -> Job {
        let mut job = self.job;
        job.record.version = self.expected_version;
        job
    }

    /// The version the stored job must still have for the change to apply.
    #[must_use]
    pub fn expected_version(&self) -> u64 {
        self.expected_version
    }

    /// The credit movement to commit in the same step: a settle or a release on the transition
    /// into a final state, nothing otherwise. (The hold is made by acceptance, never here.)
    #[must_use]
    pub fn movement(&self) -> Option<CreditMovement> {
        self.movement
    }

    /// The state before the change.
    #[must_use]
    pub fn from(&self) -> JobState {
        self.from
    }

    /// Whether losing this change in a crash is harmless because the next poll recomputes it
    /// (progress, the running state, the next poll time). A store may commit such a change
    /// without waiting for it to be durable; never one that moves credits or records a
    /// submission.
    #[must_use]
    pub fn is_recomputable(&self) -> bool {
        self.recomputable
    }

    /// Whether the change is one that waiters wait for: a new state. Progress alone is picked
    /// up by streams at their next tick, so it wakes nobody.
    #[must_use]
    pub fn changes_state(&self) -> bool {
        self.from != self.job.state()
    }

    /// Whether the job stops counting against its owner's concurrent-job limit: it becomes
    /// final having counted (every job but a batch item never admitted).
    #[must_use]
    pub fn frees_slot(&self) -> bool {
        self.counted_before && !self.job.counts_as_active()
    }

    /// Whether the job starts counting against its owner's concurrent-job limit: a batch item's
    /// admission. A store commits it only while the owner is under that limit
    /// ([`crate::ports::Commit::OwnerAtLimit`] otherwise), counting it in the same step.
    #[must_use]
    pub fn takes_slot(&self) -> bool {
        !self.counted_before && self.job.counts_as_active()
    }

    /// Whether the job is a batch item that counted against its owner's limit before this
    /// change and stops now, for the store's count of a user's admitted batch items.
    #[must_use]
    pub fn frees_batch_slot(&self) -> bool {
        self.frees_slot() && self.job.batch().is_some()
    }
}

/// A trigger that the job's state does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The job is final; nothing changes it any more (a late upstream result, a second cancel).
    #[error("job is already {}", .0.as_str())]
    AlreadyFinal(JobState),
    /// The trigger does not fit the job's progress (e.g. a poll result for a job never submitted).
    #[error("{trigger} does not apply to a job in state {}", state.as_str())]
    NotApplicable {
        /// The job's state.
        state: JobState,
        /// The trigger's name.
        trigger: &'static str,
    },
}

impl Job {
    /// The transition `trigger` causes at `now`.
    ///
    /// ```
    /// use genjobs_domain::catalog::{PricePercent, Rate, Unit};
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
    ///     Rate { per: Unit::Image, credits: 4, percent: PricePercent::FULL, batch_percent: PricePercent::FULL },
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
        let from = self.state();
        if from.is_final() {
            return Err(TransitionError::AlreadyFinal(from));
        }
        let kind = trigger.kind();
        let not_applicable = TransitionError::NotApplicable { state: from, trigger: kind.name() };
        next_state(from, kind).ok_or_else(|| not_applicable.clone())?;
        let mut next = self.clone();
        next.record.version = self.record.version + 1;
        let mut movement = None;
        match (trigger, &self.record.phase) {
            (Trigger::SubmitStarted { next_poll_at }, JobPhase::Accepted | JobPhase::WaitingForCapacity) => {
                next.record.phase = JobPhase::Sending;
                next.record.next_poll_at = Some(next_poll_at);
            }
            // From `Sending` too: a job handed to its driver is marked sending by the accept, and
            // one that found no slot was surely not sent.
            (
                Trigger::AwaitCapacity { next_poll_at },
                JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Sending,
            ) => {
                next.record.phase = JobPhase::WaitingForCapacity;
                next.record.next_poll_at = Some(next_poll_at);
            }
            (Trigger::Submitted { upstream, next_poll_at, billing }, JobPhase::Sending) => {
                next.record.phase = JobPhase::Queued { upstream, position: None };
                next.record.billing = billing;
                next.record.sent_at = Some(now);
                next.record.next_poll_at = Some(next_poll_at);
                next.record.poll_failures = 0;
            }
            (Trigger::Admitted, JobPhase::Accepted | JobPhase::WaitingForCapacity) if self.awaits_admission() => {
                if let Some(place) = next.record.batch.as_mut() {
                    place.admitted = true;
                }
            }
            (Trigger::Moderated { outcome }, JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Sending) => {
                next.record.moderation = Some(outcome);
            }
            // From `Sending` too: a job handed to its driver is marked sending by the accept, and
            // one whose check is yet to be had was surely not sent.
            (
                Trigger::ModerationDelayed { next_poll_at },
                JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Sending,
            ) => {
                next.record.phase = JobPhase::Accepted;
                next.record.next_poll_at = Some(next_poll_at);
                next.record.poll_failures = self.record.poll_failures.saturating_add(1);
            }
            (Trigger::SubmitNotReached { next_poll_at }, JobPhase::Sending) => {
                next.record.phase = JobPhase::Accepted;
                next.record.next_poll_at = Some(next_poll_at);
                next.record.poll_failures = self.record.poll_failures.saturating_add(1);
            }
            (Trigger::UpstreamQueued { position, next_poll_at }, JobPhase::Queued { upstream, .. }) => {
                next.record.phase = JobPhase::Queued { upstream: upstream.clone(), position };
                next.record.next_poll_at = Some(next_poll_at);
                next.record.poll_failures = 0;
            }
            (Trigger::UpstreamQueued { next_poll_at, .. }, JobPhase::Running { .. }) => {
                next.record.next_poll_at = Some(next_poll_at);
                next.record.poll_failures = 0;
            }
            (
                Trigger::UpstreamRunning { progress, next_poll_at },
                phase @ (JobPhase::Queued { upstream, .. } | JobPhase::Running { upstream, .. }),
            ) => {
                let reached = phase.reached();
                let upstream = upstream.clone();
                next.record.phase = JobPhase::Running {
                    upstream,
                    started_at: reached.started_at.unwrap_or(now),
                    progress: reached.progress.max(progress.min(MAX_RUNNING_PROGRESS)),
                };
                next.record.next_poll_at = Some(next_poll_at);
                next.record.poll_failures = 0;
            }
            (Trigger::UpstreamUnreachable { next_poll_at }, phase) => {
                // Only the provider's queue report keeps a position; any other news means it moved on.
                if let JobPhase::Queued { upstream, .. } = phase {
                    next.record.phase = JobPhase::Queued { upstream: upstream.clone(), position: None };
                }
                next.record.next_poll_at = Some(next_poll_at);
                next.record.poll_failures = self.record.poll_failures.saturating_add(1);
            }
            (
                Trigger::Succeeded { outputs, credits_actual, reported_units },
                phase @ (JobPhase::Queued { upstream, .. } | JobPhase::Running { upstream, .. }),
            ) => {
                let reached = phase.reached();
                let upstream = upstream.clone();
                let actual = credits_actual.min(self.record.credits_held);
                let requested_secs = self.record.input.duration_sec.unwrap_or(0);
                next.record.bill =
                    self.record.billing.as_ref().map(|b| b.delivered(&outputs, reported_units, requested_secs));
                next.record.phase = JobPhase::Succeeded {
                    upstream,
                    started_at: reached.started_at.unwrap_or(now),
                    finished_at: now,
                    outputs,
                    credits_actual: actual,
                };
                movement = Some(CreditMovement::Settle { held: self.record.credits_held, actual });
                next.record.next_poll_at = None;
            }
            (
                Trigger::ModerationRefused { outcome, error },
                phase @ (JobPhase::Accepted | JobPhase::WaitingForCapacity | JobPhase::Sending),
            ) => {
                next.record.moderation = Some(outcome);
                next.record.phase = JobPhase::Failed { reached: phase.reached(), finished_at: now, error };
                movement = Some(CreditMovement::Release(self.record.credits_held));
                next.record.next_poll_at = None;
            }
            (Trigger::Failed { error, reported_units }, phase) => {
                next.record.phase = JobPhase::Failed { reached: phase.reached(), finished_at: now, error };
                next.record.bill = self.record.billing.as_ref().map(|b| b.undelivered(reported_units));
                movement = Some(CreditMovement::Release(self.record.credits_held));
                next.record.next_poll_at = None;
            }
            (Trigger::Cancel, phase) => {
                let error = JobError::new(JobErrorCode::JobCanceled, "the job was canceled by its owner");
                next.record.phase = JobPhase::Canceled { reached: phase.reached(), canceled_at: now, error };
                next.record.bill = self.record.billing.as_ref().map(|b| b.undelivered(None));
                movement = Some(CreditMovement::Release(self.record.credits_held));
                next.record.next_poll_at = None;
            }
            _ => return Err(not_applicable),
        }
        // A job yet to start is looked at by its start deadline at the latest, however long its
        // schedule would let it rest (waiting for a slot, or unwatched at the provider): that is
        // when it fails, and a driver only wakes for a job at its next poll time.
        if let (Some(at), Some(start_by)) = (next.record.next_poll_at, next.record.start_by)
            && next.awaits_start()
        {
            next.record.next_poll_at = Some(at.min(start_by));
        }
        let recomputable = matches!(
            kind,
            TriggerKind::UpstreamQueued
                | TriggerKind::UpstreamRunning
                | TriggerKind::UpstreamUnreachable
                | TriggerKind::AwaitCapacity
                | TriggerKind::ModerationDelayed
        );
        let counted_before = self.counts_as_active();
        Ok(Transition {
            job: next,
            expected_version: self.record.version,
            movement,
            from,
            recomputable,
            counted_before,
        })
    }
}
