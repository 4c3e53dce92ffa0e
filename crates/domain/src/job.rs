//! A job and its state machine. Every change to a job is a [`Transition`] computed here, as pure
//! code, and committed by a store with compare-and-set on [`Job::version`] together with the credit
//! movement it implies, so that a final state is reached exactly once and credits move exactly once.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::catalog::Modality;
use crate::credits::{CreditMovement, Credits};
use crate::ids::{JobId, ModelId, UserId};
use crate::request::GenerationInput;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
}

/// Kind of an output item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputKind {
    /// An image.
    Image,
    /// A video.
    Video,
}

/// What the provider says about an output.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OutputMeta {
    /// MIME type, e.g. `image/png`.
    pub content_type: String,
    /// Pixel width, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Pixel height, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// Length of a video in seconds, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_sec: Option<f64>,
    /// The seed the provider used, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// One delivered output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputItem {
    /// Where to fetch it.
    pub url: String,
    /// Image or video.
    #[serde(rename = "type")]
    pub kind: OutputKind,
    /// What the provider says about it.
    pub meta: OutputMeta,
}

/// Code of a final job's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobErrorCode {
    /// The provider failed the job.
    UpstreamFailed,
    /// The job was not final within the job timeout.
    UpstreamTimeout,
    /// The provider refused the input.
    UpstreamRejected,
    /// The provider's result could not be read.
    OutputInvalid,
    /// The owner canceled the job.
    JobCanceled,
}

impl JobErrorCode {
    /// The `type` that goes with the code.
    #[must_use]
    pub fn error_type(self) -> &'static str {
        match self {
            JobErrorCode::JobCanceled => "canceled",
            _ => "upstream_error",
        }
    }
}

/// Why a job failed or was canceled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobError {
    /// `upstream_error` or `canceled`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The code.
    pub code: JobErrorCode,
    /// For a human; never the provider's key or internals.
    pub message: String,
}

impl JobError {
    /// An error with the type that belongs to `code`.
    #[must_use]
    pub fn new(code: JobErrorCode, message: impl Into<String>) -> Self {
        Self { kind: code.error_type().to_owned(), code, message: message.into() }
    }
}

/// Where a job lives at the provider: fal's queue URLs, used for everything after submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamRef {
    /// The provider's request id.
    pub request_id: String,
    /// Where to poll status.
    pub status_url: String,
    /// Where to fetch the result.
    pub response_url: String,
    /// Where to ask for cancellation.
    pub cancel_url: String,
}

/// A generation job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
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
    /// The validated request.
    pub input: GenerationInput,
    /// Where it lives at the provider, once submitted.
    pub upstream: Option<UpstreamRef>,
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

/// What happens to a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// The driver is about to send the job to the provider.
    SubmitStarted {
        /// When another driver may look at the job if this one never records the outcome; it
        /// will then fail the job rather than submit it again.
        next_poll_at: OffsetDateTime,
    },
    /// The provider accepted the job.
    Submitted {
        /// Where the job lives there.
        upstream: UpstreamRef,
        /// When to poll it first.
        next_poll_at: OffsetDateTime,
    },
    /// The submission surely did not reach the provider; it may be sent again later.
    SubmitNotReached {
        /// When to try again.
        next_poll_at: OffsetDateTime,
    },
    /// The provider reports the job waiting in its queue.
    UpstreamQueued {
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
    },
    /// The provider failed, refused, or the job timed out.
    Failed {
        /// Why.
        error: JobError,
    },
    /// The owner canceled it.
    Cancel,
}

impl Trigger {
    /// A short name for logs and tests.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Trigger::SubmitStarted { .. } => "submit_started",
            Trigger::Submitted { .. } => "submitted",
            Trigger::SubmitNotReached { .. } => "submit_not_reached",
            Trigger::UpstreamQueued { .. } => "upstream_queued",
            Trigger::UpstreamRunning { .. } => "upstream_running",
            Trigger::UpstreamUnreachable { .. } => "upstream_unreachable",
            Trigger::Succeeded { .. } => "succeeded",
            Trigger::Failed { .. } => "failed",
            Trigger::Cancel => "cancel",
        }
    }
}

/// A change to commit: the job after it, the version it must replace, and the credits it moves.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The job as it will be, with `version` already incremented.
    pub job: Job,
    /// The version the stored job must still have for the change to apply.
    pub expected_version: u64,
    /// The credit movement committed in the same step, if any.
    pub movement: Option<CreditMovement>,
    /// The state before the change.
    pub from: JobState,
    /// Whether losing this change in a crash is harmless because the next poll recomputes it
    /// (progress, the running state, the next poll time). A store may commit such a change
    /// without waiting for it to be durable; never one that moves credits or records a
    /// submission.
    pub recomputable: bool,
}

impl Transition {
    /// Whether the change is one that waiters wait for: a new state. Progress alone is picked
    /// up by streams at their next tick, so it wakes nobody.
    #[must_use]
    pub fn changes_state(&self) -> bool {
        self.from != self.job.state
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

/// Highest progress before success.
pub const MAX_RUNNING_PROGRESS: u8 = 99;

impl Job {
    /// A newly accepted job and the hold it implies.
    #[must_use]
    pub fn accept(
        id: JobId,
        user_id: UserId,
        model: ModelId,
        modality: Modality,
        input: GenerationInput,
        credits_held: Credits,
        now: OffsetDateTime,
    ) -> (Job, CreditMovement) {
        let job = Job {
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
            input,
            upstream: None,
            submit_attempted: false,
            next_poll_at: Some(now),
            poll_failures: 0,
            version: 0,
        };
        (job, CreditMovement::Hold(credits_held))
    }

    /// The transition `trigger` causes at `now`.
    ///
    /// # Errors
    /// [`TransitionError::AlreadyFinal`] for any trigger on a final job;
    /// [`TransitionError::NotApplicable`] for a provider event that does not fit: a submission
    /// of a job already submitted, or a poll result of a job not submitted.
    pub fn apply(&self, trigger: Trigger, now: OffsetDateTime) -> Result<Transition, TransitionError> {
        if self.state.is_final() {
            return Err(TransitionError::AlreadyFinal(self.state));
        }
        let not_applicable = TransitionError::NotApplicable { state: self.state, trigger: trigger.name() };
        let mut next = self.clone();
        next.version = self.version + 1;
        let mut movement = None;
        let recomputable = matches!(
            trigger,
            Trigger::UpstreamQueued { .. } | Trigger::UpstreamRunning { .. } | Trigger::UpstreamUnreachable { .. }
        );
        match trigger {
            Trigger::SubmitStarted { next_poll_at } => {
                if self.upstream.is_some() || self.submit_attempted {
                    return Err(not_applicable);
                }
                next.submit_attempted = true;
                next.next_poll_at = Some(next_poll_at);
            }
            Trigger::Submitted { upstream, next_poll_at } => {
                if self.upstream.is_some() || !self.submit_attempted {
                    return Err(not_applicable);
                }
                next.upstream = Some(upstream);
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = 0;
            }
            Trigger::SubmitNotReached { next_poll_at } => {
                if self.upstream.is_some() || !self.submit_attempted {
                    return Err(not_applicable);
                }
                next.submit_attempted = false;
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = self.poll_failures.saturating_add(1);
            }
            Trigger::UpstreamQueued { next_poll_at } => {
                if self.upstream.is_none() {
                    return Err(not_applicable);
                }
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = 0;
            }
            Trigger::UpstreamRunning { progress, next_poll_at } => {
                if self.upstream.is_none() {
                    return Err(not_applicable);
                }
                next.state = JobState::Running;
                next.started_at = self.started_at.or(Some(now));
                next.progress = self.progress.max(progress.min(MAX_RUNNING_PROGRESS));
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = 0;
            }
            Trigger::UpstreamUnreachable { next_poll_at } => {
                next.next_poll_at = Some(next_poll_at);
                next.poll_failures = self.poll_failures.saturating_add(1);
            }
            Trigger::Succeeded { outputs, credits_actual } => {
                if self.upstream.is_none() {
                    return Err(not_applicable);
                }
                let actual = credits_actual.min(self.credits_held);
                next.state = JobState::Succeeded;
                next.progress = 100;
                next.outputs = Some(outputs);
                next.started_at = self.started_at.or(Some(now));
                next.credits_actual = Some(actual);
                movement = Some(CreditMovement::Settle { held: self.credits_held, actual });
                next.finish(now);
            }
            Trigger::Failed { error } => {
                next.state = JobState::Failed;
                next.error = Some(error);
                next.credits_actual = Some(Credits::ZERO);
                movement = Some(CreditMovement::Release(self.credits_held));
                next.finish(now);
            }
            Trigger::Cancel => {
                next.state = JobState::Canceled;
                next.error = Some(JobError::new(JobErrorCode::JobCanceled, "the job was canceled by its owner"));
                next.credits_actual = Some(Credits::ZERO);
                next.canceled_at = Some(now);
                movement = Some(CreditMovement::Release(self.credits_held));
                next.finish(now);
            }
        }
        Ok(Transition { job: next, expected_version: self.version, movement, from: self.state, recomputable })
    }

    /// Whether `other` shows a client the same job: everything but the schedule (next poll,
    /// failure count) and the version. A poll that changes nothing else need not be written.
    #[must_use]
    pub fn same_observable_state(&self, other: &Job) -> bool {
        self.state == other.state
            && self.progress == other.progress
            && self.started_at == other.started_at
            && self.finished_at == other.finished_at
            && self.canceled_at == other.canceled_at
            && self.outputs == other.outputs
            && self.error == other.error
            && self.credits_actual == other.credits_actual
            && self.upstream == other.upstream
            && self.submit_attempted == other.submit_attempted
    }

    fn finish(&mut self, now: OffsetDateTime) {
        self.finished_at = Some(now);
        self.next_poll_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000)
    }

    fn input() -> GenerationInput {
        GenerationInput {
            prompt: "a cat".into(),
            negative_prompt: None,
            aspect_ratio: "1:1".into(),
            resolution: None,
            duration_sec: None,
            n: Some(2),
            seed: None,
            image_inputs: vec![],
            extra: None,
        }
    }

    fn upstream() -> UpstreamRef {
        UpstreamRef {
            request_id: "r1".into(),
            status_url: "s".into(),
            response_url: "r".into(),
            cancel_url: "c".into(),
        }
    }

    fn accepted() -> (Job, CreditMovement) {
        Job::accept(
            JobId::new_at(now()),
            UserId::new_at(now()),
            ModelId::new("nano-banana"),
            Modality::Image,
            input(),
            Credits::new(8),
            now(),
        )
    }

    fn queued() -> Job {
        accepted().0
    }

    fn step(job: &Job, trigger: Trigger) -> Job {
        job.apply(trigger, now()).unwrap().job
    }

    fn submitted() -> Job {
        let attempted = step(&queued(), Trigger::SubmitStarted { next_poll_at: now() });
        step(&attempted, Trigger::Submitted { upstream: upstream(), next_poll_at: now() })
    }

    fn in_state(state: JobState) -> Job {
        let job = submitted();
        match state {
            JobState::Queued => job,
            JobState::Running => step(&job, Trigger::UpstreamRunning { progress: 10, next_poll_at: now() }),
            JobState::Succeeded => step(&job, success(8)),
            JobState::Failed => step(&job, failure()),
            JobState::Canceled => step(&job, Trigger::Cancel),
        }
    }

    fn image() -> OutputItem {
        OutputItem {
            url: "https://x/1.png".into(),
            kind: OutputKind::Image,
            meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
        }
    }

    fn success(actual: u64) -> Trigger {
        Trigger::Succeeded { outputs: vec![image()], credits_actual: Credits::new(actual) }
    }

    fn failure() -> Trigger {
        Trigger::Failed { error: JobError::new(JobErrorCode::UpstreamFailed, "boom") }
    }

    fn all_triggers() -> Vec<Trigger> {
        vec![
            Trigger::SubmitStarted { next_poll_at: now() },
            Trigger::Submitted { upstream: upstream(), next_poll_at: now() },
            Trigger::SubmitNotReached { next_poll_at: now() },
            Trigger::UpstreamQueued { next_poll_at: now() },
            Trigger::UpstreamRunning { progress: 50, next_poll_at: now() },
            Trigger::UpstreamUnreachable { next_poll_at: now() },
            success(4),
            failure(),
            Trigger::Cancel,
        ]
    }

    #[test]
    fn accepting_holds_the_price() {
        let (job, movement) = accepted();
        assert_eq!(job.state, JobState::Queued);
        assert_eq!(movement, CreditMovement::Hold(Credits::new(8)));
        assert_eq!((job.started_at, job.finished_at, job.credits_actual), (None, None, None));
        assert_eq!((&job.outputs, &job.error), (&None, &None));
    }

    /// Every (state, trigger) pair: final states refuse everything; non-final states move as the
    /// table says, and a transition into a final state carries exactly one settle or release.
    #[test]
    fn every_state_and_trigger_pair() {
        for state in JobState::ALL {
            for trigger in all_triggers() {
                let job = in_state(state);
                let name = trigger.name();
                let result = job.apply(trigger, now());
                if state.is_final() {
                    assert_eq!(result, Err(TransitionError::AlreadyFinal(state)), "{state:?} {name}");
                    continue;
                }
                let expected = match name {
                    "submit_started" | "submitted" | "submit_not_reached" => None,
                    "upstream_queued" | "upstream_unreachable" => Some(state),
                    "upstream_running" => Some(JobState::Running),
                    "succeeded" => Some(JobState::Succeeded),
                    "failed" => Some(JobState::Failed),
                    "cancel" => Some(JobState::Canceled),
                    other => panic!("untested trigger {other}"),
                };
                match expected {
                    None => assert!(
                        matches!(result, Err(TransitionError::NotApplicable { .. })),
                        "{state:?} {name}: a submitted job takes no submission events"
                    ),
                    Some(next) => {
                        let t = result.unwrap();
                        assert_eq!(t.job.state, next, "{state:?} {name}");
                        assert_eq!(t.expected_version, job.version);
                        assert_eq!(t.job.version, job.version + 1);
                        let movement = match next {
                            JobState::Succeeded => {
                                Some(CreditMovement::Settle { held: Credits::new(8), actual: Credits::new(4) })
                            }
                            JobState::Failed | JobState::Canceled => Some(CreditMovement::Release(Credits::new(8))),
                            _ => None,
                        };
                        assert_eq!(t.movement, movement, "{state:?} {name}");
                    }
                }
            }
        }
    }

    #[test]
    fn only_poll_results_are_recomputable_and_only_new_states_wake_waiters() {
        let running = in_state(JobState::Running);
        let progress = running.apply(Trigger::UpstreamRunning { progress: 70, next_poll_at: now() }, now()).unwrap();
        assert!(progress.recomputable && !progress.changes_state());
        let started = submitted().apply(Trigger::UpstreamRunning { progress: 1, next_poll_at: now() }, now()).unwrap();
        assert!(started.recomputable && started.changes_state());
        for trigger in [Trigger::SubmitStarted { next_poll_at: now() }, success(1), failure(), Trigger::Cancel] {
            let base = if matches!(trigger, Trigger::SubmitStarted { .. }) { queued() } else { submitted() };
            assert!(!base.apply(trigger, now()).unwrap().recomputable);
        }
        assert!(running.apply(Trigger::Cancel, now()).unwrap().changes_state());
    }

    #[test]
    fn a_poll_that_only_reschedules_changes_nothing_observable() {
        let running = in_state(JobState::Running);
        let same =
            step(&running, Trigger::UpstreamRunning { progress: 10, next_poll_at: now() + time::Duration::seconds(2) });
        assert!(same.same_observable_state(&running));
        let unreachable = step(&running, Trigger::UpstreamUnreachable { next_poll_at: now() });
        assert!(unreachable.same_observable_state(&running));
        let further = step(&running, Trigger::UpstreamRunning { progress: 11, next_poll_at: now() });
        assert!(!further.same_observable_state(&running));
        assert!(!step(&running, Trigger::Cancel).same_observable_state(&running));
    }

    #[test]
    fn submission_steps_apply_only_before_submission() {
        let job = queued();
        assert!(job.apply(Trigger::Submitted { upstream: upstream(), next_poll_at: now() }, now()).is_err());
        let attempted = step(&job, Trigger::SubmitStarted { next_poll_at: now() });
        assert!(attempted.submit_attempted);
        assert!(
            attempted.apply(Trigger::SubmitStarted { next_poll_at: now() }, now()).is_err(),
            "never submitted twice"
        );
        let retry = step(&attempted, Trigger::SubmitNotReached { next_poll_at: now() });
        assert!(!retry.submit_attempted);
        assert_eq!(retry.poll_failures, 1);
        assert!(queued().apply(success(1), now()).is_err(), "no result without submission");
        assert!(queued().apply(Trigger::UpstreamRunning { progress: 1, next_poll_at: now() }, now()).is_err());
    }

    #[test]
    fn progress_never_decreases_and_stays_below_100_until_success() {
        let job = step(&submitted(), Trigger::UpstreamRunning { progress: 60, next_poll_at: now() });
        let lower = step(&job, Trigger::UpstreamRunning { progress: 30, next_poll_at: now() });
        assert_eq!(lower.progress, 60);
        let over = step(&job, Trigger::UpstreamRunning { progress: 100, next_poll_at: now() });
        assert_eq!(over.progress, MAX_RUNNING_PROGRESS);
        assert_eq!(step(&job, success(8)).progress, 100);
    }

    #[test]
    fn success_charges_at_most_the_hold() {
        let t = submitted().apply(success(50), now()).unwrap();
        assert_eq!(t.job.credits_actual, Some(Credits::new(8)));
        assert_eq!(t.movement, Some(CreditMovement::Settle { held: Credits::new(8), actual: Credits::new(8) }));
        assert!(t.job.outputs.is_some());
        assert_eq!(t.job.error, None);
        assert_eq!(t.job.finished_at, Some(now()));
        assert_eq!(t.job.next_poll_at, None);
    }

    #[test]
    fn cancel_sets_canceled_at_equal_to_finished_at_and_releases() {
        let t = in_state(JobState::Running).apply(Trigger::Cancel, now()).unwrap();
        assert_eq!(t.job.canceled_at, Some(now()));
        assert_eq!(t.job.finished_at, t.job.canceled_at);
        assert_eq!(t.job.credits_actual, Some(Credits::ZERO));
        assert_eq!(t.job.error.as_ref().unwrap().code, JobErrorCode::JobCanceled);
        assert_eq!(t.job.error.as_ref().unwrap().kind, "canceled");
        assert_eq!(t.job.outputs, None);
    }

    #[test]
    fn failure_releases_and_records_the_error() {
        let t = queued().apply(failure(), now()).unwrap();
        assert_eq!(t.job.error.as_ref().unwrap().kind, "upstream_error");
        assert_eq!(t.job.credits_actual, Some(Credits::ZERO));
        assert_eq!(t.movement, Some(CreditMovement::Release(Credits::new(8))));
    }
}
