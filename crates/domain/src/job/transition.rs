//! A computed change to a job, ready for a store to commit with compare-and-set.

use super::{Job, JobState};
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

    /// Whether the job becomes final, which frees one of its owner's concurrent-job slots.
    #[must_use]
    pub fn frees_slot(&self) -> bool {
        self.job.state().is_final()
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
