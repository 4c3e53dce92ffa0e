//! One step of one job: what the provider says of it, and what that does to the job. A driver
//! (the `genjobs-driver` crate runs one per replica) decides which job to step and when; the step
//! itself is a use case like any other, over the ports: it sends an unsent job, polls a sent one,
//! fetches a result, times a job out, and commits what changed by compare-and-set, so that a
//! late answer racing a cancel moves no credit twice.
//!
//! A step writes to the store only what a client can see (a new state, new progress, a
//! submission, a final result); the next poll time lives in the driver's memory while it holds
//! the job's lease.

use std::time::Duration;

use time::OffsetDateTime;

mod admission;
mod outcome;
mod route;
mod screening;
mod timeout;

pub(crate) use outcome::ending_trigger;
pub use screening::Moderator;

use super::Ports;
use crate::catalog::{Billing, LiveCatalog};
use crate::ids::{JobId, LeaseId};
use crate::job::{Job, JobError, JobErrorCode, Trigger};
use crate::ports::{Capacity, Placement, PollFailure, SubmitFailure, UpstreamStatus};
use tracing::Instrument;

/// Back-off cap: a job whose provider keeps failing transiently is polled at most every
/// 16 intervals.
const MAX_BACKOFF_EXPONENT: u32 = 4;

/// Progress is estimated against this when the catalog no longer knows the model.
const FALLBACK_RUN_SECS: u32 = 60;

/// The rules a step follows: how often a job is polled, when it times out, and how long a
/// driver's lease on it lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSettings {
    /// Time between two polls of one job.
    pub poll_interval: Duration,
    /// A job not final this long after it was sent fails with `UPSTREAM_TIMEOUT`.
    pub job_timeout: Duration,
    /// How long a driver's lease lasts without renewal; another driver takes its jobs over after.
    /// A submission being sent is marked in flight for this long.
    pub lease: Duration,
}

/// When a job in hand was due, and how long until its next poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    /// When the step was due.
    pub due: OffsetDateTime,
    /// The time between two polls of this job now (longer while nobody watches it, when the
    /// provider notifies every end).
    pub interval: Duration,
}

/// What a step leaves its driver with.
#[derive(Debug, Clone, PartialEq)]
pub enum Stepped {
    /// The job to keep holding, with its next poll time; `None` when it is final or no longer
    /// this driver's.
    Done(Option<Job>),
    /// The provider took the job's submission but the store did not record it: the driver keeps
    /// the job and records it again ([`JobSteps::record_submission`]) after
    /// [`UnrecordedSubmission::retry_in`].
    Unrecorded(UnrecordedSubmission),
}

/// A submission the provider accepted whose reference the store has not recorded yet. It exists
/// only in this process: a job found submitted-but-unreferenced is failed rather than sent twice,
/// so the reference is recorded again with back-off until it lands or the job's timeout passes.
#[derive(Debug, Clone, PartialEq)]
pub struct UnrecordedSubmission {
    job: Job,
    submitted: Trigger,
    failures: u32,
    retry_in: Duration,
}

impl UnrecordedSubmission {
    /// How long to wait before recording it again.
    #[must_use]
    pub fn retry_in(&self) -> Duration {
        self.retry_in
    }
}

/// Steps jobs forward, one at a time.
#[derive(Clone)]
pub struct JobSteps {
    ports: Ports,
    catalog: LiveCatalog,
    settings: StepSettings,
    moderator: Option<Moderator>,
}

impl JobSteps {
    /// Steps over `ports`, reading models from `catalog`.
    #[must_use]
    pub fn new(ports: Ports, catalog: impl Into<LiveCatalog>, settings: StepSettings) -> Self {
        Self { ports, catalog: catalog.into(), settings, moderator: None }
    }

    /// The same steps, checking every unsent job with `moderator` before it is sent.
    #[must_use]
    pub fn with_moderator(mut self, moderator: Moderator) -> Self {
        self.moderator = Some(moderator);
        self
    }

    /// The ports the steps use, for the driver to claim, renew and listen with.
    #[must_use]
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// The rules the steps follow.
    #[must_use]
    pub fn settings(&self) -> &StepSettings {
        &self.settings
    }

    /// Ends `lease`, that of a driver that stops holding `held` jobs, so that other drivers take
    /// them over at once rather than after the lease runs out.
    pub async fn hand_back(&self, lease: LeaseId, held: usize) {
        match self.ports.jobs.end_lease(lease).await {
            Ok(()) => tracing::info!(held, "driver stopped; jobs handed back"),
            Err(e) => tracing::warn!(held, error = %e, "driver stopped; its lease was not ended, it will run out"),
        }
    }

    /// Whether a job changed elsewhere is final (canceled, most likely), so that the driver
    /// stops polling it.
    pub async fn is_final(&self, id: JobId) -> bool {
        matches!(self.ports.jobs.job(id).await, Ok(stored) if stored.as_ref().is_none_or(|job| job.state().is_final()))
    }

    /// Advances one job by one step and commits what changed: see [`Stepped`].
    pub async fn advance(&self, job: Job) -> Stepped {
        let due = job.next_poll_at().unwrap_or_else(|| self.ports.clock.now());
        self.step(job, Cadence { due, interval: self.settings.poll_interval }, false).await
    }

    /// Undoes the started submission of jobs handed to a driver that never sent them, so that
    /// any driver submits them once their lease ends (see [`crate::ports::JobHandoff`]).
    pub async fn withdraw(&self, jobs: Vec<Job>) {
        super::handoff::withdraw(self.ports.jobs.as_ref(), self.ports.clock.as_ref(), jobs).await;
    }

    /// [`JobSteps::advance`] for a job due at its `cadence`; `handed` when it came from this
    /// process's gateway and was not sent yet, its submission's start being recorded by the
    /// accept.
    pub async fn step(&self, job: Job, cadence: Cadence, handed: bool) -> Stepped {
        // With traces on, each step is a span of the trace the job's submission started, wherever
        // it runs; off, no span is made at all.
        let span = match self.ports.traces.are_on() {
            true => tracing::info_span!("job.step", genjobs.job_id = %job.id(), genjobs.state = job.state().as_str()),
            false => tracing::Span::none(),
        };
        if let Some(parent) = job.trace() {
            self.ports.traces.continue_trace(&span, parent);
        }
        self.step_within(job, cadence, handed).instrument(span).await
    }

    /// [`JobSteps::step`] within its span.
    async fn step_within(&self, job: Job, cadence: Cadence, handed: bool) -> Stepped {
        let now = self.ports.clock.now();
        // The timeout counts from the send: a job waiting for a slot has not started it. A job
        // sent without a recorded time counts from its acceptance.
        let running_since = match (job.sent_at(), job.submit_attempted()) {
            (Some(sent), _) => Some(sent),
            (None, true) => Some(job.created_at()),
            (None, false) => None,
        };
        if running_since.is_some_and(|since| now - since >= self.settings.job_timeout) {
            return Stepped::Done(self.time_out(&job).await);
        }
        // A job yet to start fails at its start deadline: one not sent at once; one the provider
        // still queues once its status says so (below), so that a job that started in time is
        // never stopped.
        if job.missed_its_start(now) && job.upstream().is_none() {
            return Stepped::Done(self.miss_start(&job, None).await);
        }
        let kept = match job.upstream() {
            None if job.submit_attempted() && !handed => {
                let error = JobError::new(
                    JobErrorCode::UpstreamFailed,
                    "the submission was interrupted; it is not repeated so that it never runs twice",
                );
                self.commit(&job, Trigger::failed(error)).await
            }
            None => return self.submit(job, cadence, handed).await,
            Some(upstream) => {
                let trigger = match self.ports.upstream.status(job.id(), upstream).await {
                    Ok(UpstreamStatus::Queued { .. }) if job.missed_its_start(self.ports.clock.now()) => {
                        return Stepped::Done(self.miss_start(&job, Some(upstream)).await);
                    }
                    Ok(UpstreamStatus::Queued { position }) => {
                        Trigger::UpstreamQueued { position, next_poll_at: self.next_poll(cadence, 0) }
                    }
                    Ok(UpstreamStatus::Running { percent }) => Trigger::UpstreamRunning {
                        progress: self.progress(&job, percent),
                        next_poll_at: self.next_poll(cadence, 0),
                    },
                    Ok(UpstreamStatus::Completed) => {
                        let fetched = self.ports.upstream.result(job.id(), upstream, job.modality()).await;
                        let fetched = super::outputs::keep_result(self.ports.outputs.as_ref(), job.id(), fetched).await;
                        self.result(&job, cadence, fetched)
                    }
                    Ok(UpstreamStatus::Failed(failure)) => self.result(&job, cadence, Err(failure)),
                    Err(PollFailure::Transient(reason)) => {
                        tracing::warn!(job_id = %job.id(), %reason, "status poll failed; backing off");
                        Trigger::UpstreamUnreachable { next_poll_at: self.next_poll(cadence, job.poll_failures() + 1) }
                    }
                    Err(PollFailure::Gone(reason)) => Trigger::failed(JobError::new(
                        JobErrorCode::UpstreamFailed,
                        format!("the provider lost the job: {reason}"),
                    )),
                };
                self.commit(&job, trigger).await
            }
        };
        Stepped::Done(kept)
    }

    /// Sends a job to the provider. A slot of the provider's keys is reserved first; with none
    /// free the job waits for capacity, unsent, until a slot freeing wakes it (or, should that
    /// signal be lost, a lease later). The start is recorded next, durably, unless the accept
    /// recorded it (`started`): from then on the job may exist at the provider.
    async fn submit(&self, job: Job, cadence: Cadence, started: bool) -> Stepped {
        // A job runs on the model it was accepted for even if the operator disabled or deleted
        // it since: the catalog keeps deleted models' documents for that.
        let catalog = self.catalog.current();
        let Some(model) = catalog.any_model(job.model().as_str()) else {
            let error = JobError::new(JobErrorCode::UpstreamFailed, "the model is unknown to this catalog");
            return Stepped::Done(self.commit(&job, Trigger::failed(error)).await);
        };
        let job = match self.admit(job).await {
            Ok(job) => job,
            Err(stepped) => return stepped,
        };
        let job = match self.screen(job, model, cadence).await {
            Ok(job) => job,
            Err(stepped) => return stepped,
        };
        let routed = match self.routed(&job, model).await {
            Ok(routed) => routed,
            Err(error) => return Stepped::Done(self.commit(&job, Trigger::failed(error)).await),
        };
        let placement = match self.reserve(&job, &routed).await {
            Capacity::Free(placement) => Placement { priority: job.priority(), ..placement },
            Capacity::Full => {
                tracing::debug!(job_id = %job.id(), "no slot at the provider; the job waits for capacity");
                let next_poll_at = self.ports.clock.now() + self.settings.lease;
                return Stepped::Done(self.commit(&job, Trigger::AwaitCapacity { next_poll_at }).await);
            }
            Capacity::Unknown(reason) => {
                tracing::warn!(job_id = %job.id(), %reason, "the provider's slots could not be counted; will look again");
                let next_poll_at = self.next_poll(cadence, job.poll_failures() + 1);
                return Stepped::Done(self.commit(&job, Trigger::AwaitCapacity { next_poll_at }).await);
            }
        };
        let job = if started {
            job
        } else {
            let in_flight_until = self.ports.clock.now() + self.settings.lease;
            match self.commit(&job, Trigger::SubmitStarted { next_poll_at: in_flight_until }).await {
                Some(job) => job,
                None => return Stepped::Done(None),
            }
        };
        let trigger = match self.ports.upstream.submit_placed(job.id(), &routed.model, job.input(), &placement).await {
            Ok(upstream) => {
                tracing::info!(job_id = %job.id(), model = %model.id, provider = upstream.provider(), "submitted upstream");
                let next_poll_at = self.ports.clock.now() + cadence.interval;
                let billing = model
                    .routes_of(upstream.provider())
                    .next()
                    .and_then(|(_, route)| route.cost)
                    .map(|cost| Billing { cost, key_hint: self.ports.upstream.key_hint(&upstream) });
                let submitted = Trigger::Submitted { upstream, next_poll_at, billing };
                return self
                    .record_submission(UnrecordedSubmission { job, submitted, failures: 0, retry_in: Duration::ZERO })
                    .await;
            }
            Err(SubmitFailure::NotReached(reason)) => {
                tracing::warn!(job_id = %job.id(), %reason, "provider not reached; will submit again");
                Trigger::SubmitNotReached { next_poll_at: self.next_poll(cadence, job.poll_failures() + 1) }
            }
            Err(SubmitFailure::AtCapacity(reason)) => {
                // Nothing was sent: it waits for a slot of the provider it fell back to.
                tracing::info!(job_id = %job.id(), %reason, "waiting for capacity at the provider");
                Trigger::AwaitCapacity { next_poll_at: self.ports.clock.now() + self.settings.lease }
            }
            Err(SubmitFailure::Rejected(reason)) => Trigger::failed(JobError::new(
                JobErrorCode::UpstreamRejected,
                format!("the provider refused the input: {reason}"),
            )),
            Err(SubmitFailure::ContentRefused(reason)) => Trigger::failed(JobError::new(
                JobErrorCode::ContentRefused,
                format!("the provider refused the content: {reason}"),
            )),
            Err(SubmitFailure::Ambiguous(reason)) => {
                Trigger::failed(JobError::new(JobErrorCode::UpstreamFailed, format!("the submission failed: {reason}")))
            }
        };
        Stepped::Done(self.commit(&job, trigger).await)
    }
}
