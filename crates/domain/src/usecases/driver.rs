//! The job driver: moves every job forward from what the provider says. One loop claims due jobs
//! from the store (leased, so that several replicas share the work without doing a job twice) and
//! advances each by one step: submit, poll, fetch the result, or time it out. Waiters never poll the
//! provider themselves; they wake on the events this driver publishes.

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, StreamExt};

use super::Ports;
use crate::catalog::Catalog;
use crate::job::{Job, JobError, JobErrorCode, MAX_RUNNING_PROGRESS, Trigger};
use crate::ports::{Commit, PollFailure, ResultFailure, SubmitFailure, UpstreamStatus};

/// How the driver paces itself.
#[derive(Debug, Clone)]
pub struct DriverSettings {
    /// Time between two polls of one job.
    pub poll_interval: Duration,
    /// A job not final this long after acceptance fails with `UPSTREAM_TIMEOUT`.
    pub job_timeout: Duration,
    /// How long a claimed job is reserved for this driver; another driver takes it over after.
    pub lease: Duration,
    /// How long the driver sleeps when no job is due.
    pub idle_tick: Duration,
    /// Jobs claimed at once.
    pub batch: usize,
    /// Jobs advanced concurrently, which bounds the requests in flight to the provider.
    pub max_in_flight: usize,
}

impl DriverSettings {
    /// Settings for a poll interval and job timeout, with the rest derived: a tick of a tenth of
    /// the interval (10 to 100 ms) keeps every poll within ±10 % of its time.
    #[must_use]
    pub fn new(poll_interval: Duration, job_timeout: Duration) -> Self {
        Self {
            poll_interval,
            job_timeout,
            lease: Duration::from_secs(20).max(poll_interval * 3),
            idle_tick: (poll_interval / 10).clamp(Duration::from_millis(10), Duration::from_millis(100)),
            batch: 256,
            max_in_flight: 256,
        }
    }
}

/// Back-off cap: a job whose provider keeps failing transiently is polled at most every
/// 16 intervals.
const MAX_BACKOFF_EXPONENT: u32 = 4;

/// Progress is estimated against this when the catalog no longer knows the model.
const FALLBACK_RUN_SECS: u32 = 60;

/// Moves jobs forward.
#[derive(Clone)]
pub struct JobDriver {
    ports: Ports,
    catalog: Arc<Catalog>,
    settings: DriverSettings,
}

impl JobDriver {
    /// A driver over `ports`.
    #[must_use]
    pub fn new(ports: Ports, catalog: Arc<Catalog>, settings: DriverSettings) -> Self {
        Self { ports, catalog, settings }
    }

    /// Runs until dropped: claims due jobs and advances them, at most `max_in_flight` at once.
    pub async fn run(&self) {
        let due = stream::unfold((), |()| async { Some((self.next_batch().await, ())) }).flat_map(stream::iter);
        due.for_each_concurrent(self.settings.max_in_flight, |job| self.advance(job)).await;
    }

    async fn next_batch(&self) -> Vec<Job> {
        loop {
            let now = self.ports.clock.now();
            match self.ports.jobs.claim_due(now, now + self.settings.lease, self.settings.batch).await {
                Ok(jobs) if !jobs.is_empty() => return jobs,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not claim due jobs"),
            }
            self.ports.clock.sleep(self.settings.idle_tick).await;
        }
    }

    /// Advances one claimed job by one step and commits the result.
    pub async fn advance(&self, job: Job) {
        let now = self.ports.clock.now();
        if now - job.created_at >= self.settings.job_timeout {
            let error = JobError::new(JobErrorCode::UpstreamTimeout, "the job did not finish in time");
            self.commit(&job, Trigger::Failed { error }).await;
            return;
        }
        match job.upstream.clone() {
            None if job.submit_attempted => {
                let error = JobError::new(
                    JobErrorCode::UpstreamFailed,
                    "the submission was interrupted; it is not repeated so that it never runs twice",
                );
                self.commit(&job, Trigger::Failed { error }).await;
            }
            None => self.submit(job).await,
            Some(upstream) => {
                let trigger = match self.ports.upstream.status(job.id, &upstream).await {
                    Ok(UpstreamStatus::Queued) => Trigger::UpstreamQueued { next_poll_at: self.next_poll(&job, 0) },
                    Ok(UpstreamStatus::Running { percent }) => Trigger::UpstreamRunning {
                        progress: self.progress(&job, percent),
                        next_poll_at: self.next_poll(&job, 0),
                    },
                    Ok(UpstreamStatus::Completed) => self.result(&job, &upstream).await,
                    Err(PollFailure::Transient(reason)) => {
                        tracing::warn!(job_id = %job.id, request_id = %upstream.request_id, %reason, "status poll failed; backing off");
                        Trigger::UpstreamUnreachable { next_poll_at: self.next_poll(&job, job.poll_failures + 1) }
                    }
                    Err(PollFailure::Gone(reason)) => Trigger::Failed {
                        error: JobError::new(
                            JobErrorCode::UpstreamFailed,
                            format!("the provider lost the job: {reason}"),
                        ),
                    },
                };
                self.commit(&job, trigger).await;
            }
        }
    }

    async fn submit(&self, job: Job) {
        let Some(model) = self.catalog.model(job.model.as_str()) else {
            let error = JobError::new(JobErrorCode::UpstreamFailed, "the model is no longer offered");
            self.commit(&job, Trigger::Failed { error }).await;
            return;
        };
        let in_flight_until = self.ports.clock.now() + self.settings.lease;
        let Some(job) = self.commit(&job, Trigger::SubmitStarted { next_poll_at: in_flight_until }).await else {
            return;
        };
        let input = model.fal.upstream_input(&job.input);
        let trigger = match self.ports.upstream.submit(job.id, &input).await {
            Ok(upstream) => {
                tracing::info!(job_id = %job.id, request_id = %upstream.request_id, endpoint = %input.endpoint, "submitted upstream");
                Trigger::Submitted { upstream, next_poll_at: self.now_plus_interval() }
            }
            Err(SubmitFailure::NotReached(reason)) => {
                tracing::warn!(job_id = %job.id, %reason, "provider not reached; will submit again");
                Trigger::SubmitNotReached { next_poll_at: self.next_poll(&job, job.poll_failures + 1) }
            }
            Err(SubmitFailure::Rejected(reason)) => Trigger::Failed {
                error: JobError::new(
                    JobErrorCode::UpstreamRejected,
                    format!("the provider refused the input: {reason}"),
                ),
            },
            Err(SubmitFailure::Ambiguous(reason)) => Trigger::Failed {
                error: JobError::new(JobErrorCode::UpstreamFailed, format!("the submission failed: {reason}")),
            },
        };
        self.commit(&job, trigger).await;
    }

    async fn result(&self, job: &Job, upstream: &crate::job::UpstreamRef) -> Trigger {
        let failed = |code, message: String| Trigger::Failed { error: JobError::new(code, message) };
        match self.ports.upstream.result(job.id, upstream, job.modality).await {
            Ok(outputs) if outputs.is_empty() => {
                failed(JobErrorCode::OutputInvalid, "the provider returned no outputs".into())
            }
            Ok(outputs) => {
                let credits_actual = self
                    .catalog
                    .model(job.model.as_str())
                    .map_or(job.credits_held, |m| m.price_delivered(&job.input, &outputs));
                Trigger::Succeeded { outputs, credits_actual }
            }
            Err(ResultFailure::Rejected(reason)) => {
                failed(JobErrorCode::UpstreamRejected, format!("the provider refused the input: {reason}"))
            }
            Err(ResultFailure::Failed(reason)) => {
                failed(JobErrorCode::UpstreamFailed, format!("the generation failed: {reason}"))
            }
            Err(ResultFailure::Invalid(reason)) => {
                failed(JobErrorCode::OutputInvalid, format!("the provider's result could not be read: {reason}"))
            }
            Err(ResultFailure::Transient(reason)) => {
                tracing::warn!(job_id = %job.id, request_id = %upstream.request_id, %reason, "result fetch failed; backing off");
                Trigger::UpstreamUnreachable { next_poll_at: self.next_poll(job, job.poll_failures + 1) }
            }
        }
    }

    /// When to poll a job next. On success the cadence follows the job's own schedule (its due
    /// time plus one interval), not the time the poll finished, so that a slow answer does not
    /// stretch every interval; after failures it backs off from now.
    fn next_poll(&self, job: &Job, failures: u32) -> time::OffsetDateTime {
        let now = self.ports.clock.now();
        if failures > 0 {
            return now + self.settings.poll_interval * (1u32 << failures.min(MAX_BACKOFF_EXPONENT));
        }
        let due = job.next_poll_at.unwrap_or(now);
        let next = due + self.settings.poll_interval;
        if next > now { next } else { now + self.settings.poll_interval / 10 }
    }

    fn now_plus_interval(&self) -> time::OffsetDateTime {
        self.ports.clock.now() + self.settings.poll_interval
    }

    /// The provider's percentage when it gives one, otherwise the time run so far against the
    /// model's typical run time; the job's own rule keeps it monotonic and below 100.
    fn progress(&self, job: &Job, percent: Option<u8>) -> u8 {
        if let Some(percent) = percent {
            return percent.min(MAX_RUNNING_PROGRESS);
        }
        let typical = self.catalog.model(job.model.as_str()).map_or(FALLBACK_RUN_SECS, |m| m.typical_run_secs);
        let started = job.started_at.unwrap_or_else(|| self.ports.clock.now());
        let elapsed = (self.ports.clock.now() - started).as_seconds_f64().max(0.0);
        let estimate = (elapsed / f64::from(typical.max(1)) * 100.0).floor();
        estimate.min(f64::from(MAX_RUNNING_PROGRESS)) as u8
    }

    /// Commits `trigger` on `job`; returns the job as stored when it applied. A job that changed
    /// meanwhile (canceled, say) is left alone: a late provider answer is discarded.
    async fn commit(&self, job: &Job, trigger: Trigger) -> Option<Job> {
        let name = trigger.name();
        let transition = match job.apply(trigger, self.ports.clock.now()) {
            Ok(t) => t,
            Err(e) => {
                tracing::info!(job_id = %job.id, trigger = name, reason = %e, "provider event discarded");
                return None;
            }
        };
        let changes_state = transition.changes_state();
        match self.ports.jobs.commit(transition).await {
            Ok(Commit::Applied(stored)) => {
                if changes_state {
                    tracing::info!(
                        job_id = %stored.id,
                        state = stored.state.as_str(),
                        progress = stored.progress,
                        credits_actual = ?stored.credits_actual.map(|c| c.get()),
                        error_code = ?stored.error.as_ref().map(|e| e.code),
                        "job {}", name
                    );
                }
                if changes_state {
                    self.ports.events.publish(stored.id).await;
                }
                Some(stored)
            }
            Ok(Commit::Stale(current)) => {
                tracing::info!(job_id = %job.id, trigger = name, state = current.state.as_str(), "job changed meanwhile; provider event discarded");
                None
            }
            Ok(Commit::Missing) => {
                tracing::warn!(job_id = %job.id, "job vanished from the store");
                None
            }
            Err(e) => {
                tracing::warn!(job_id = %job.id, trigger = name, error = %e, "could not commit; the lease will run out and the step repeat");
                None
            }
        }
    }
}
