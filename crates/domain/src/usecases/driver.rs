//! The job driver: moves every job forward from what the provider says. Each driver claims due
//! jobs from the store under a lease, holds them in memory, and polls each at its cadence; it
//! writes to the store only what a client can see (a new state, new progress, a submission, a
//! final result), and renews the leases of everything it holds in one batch every third of a
//! lease. Several replicas share the work this way without doing a job twice, and a replica that
//! dies has its jobs claimed by another once their leases run out. Waiters never poll the
//! provider themselves; they wake on the events this driver publishes.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{Either, select};
use futures_util::stream::{FuturesUnordered, StreamExt};
use time::OffsetDateTime;

use super::Ports;
use crate::catalog::Catalog;
use crate::ids::JobId;
use crate::job::{Job, JobError, JobErrorCode, MAX_RUNNING_PROGRESS, Trigger};
use crate::ports::{Commit, PollFailure, ResultFailure, SubmitFailure, UpstreamStatus};

/// How the driver paces itself.
#[derive(Debug, Clone)]
pub struct DriverSettings {
    /// Time between two polls of one job.
    pub poll_interval: Duration,
    /// A job not final this long after acceptance fails with `UPSTREAM_TIMEOUT`.
    pub job_timeout: Duration,
    /// How long a claimed job is reserved for this driver without renewal; another driver takes
    /// it over after.
    pub lease: Duration,
    /// How often the driver looks for new due jobs.
    pub idle_tick: Duration,
    /// Jobs claimed at once.
    pub batch: usize,
    /// Jobs advanced concurrently, which bounds the requests in flight to the provider.
    pub max_in_flight: usize,
    /// Jobs held at most; beyond, the driver leaves due jobs to other replicas.
    pub max_held: usize,
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
            max_held: 100_000,
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

/// What woke the driver's loop.
enum Woke {
    /// A job's step ended; the job to keep holding, if any.
    Stepped(JobId, Option<Box<Job>>),
    /// A job changed elsewhere.
    Changed(JobId),
    /// Time for the next claim, renewal or poll.
    Timer,
}

/// The jobs a driver holds, by id and by next poll time, and those being advanced right now.
#[derive(Default)]
struct Held {
    jobs: HashMap<JobId, Job>,
    schedule: BTreeSet<(OffsetDateTime, JobId)>,
    advancing: HashSet<JobId>,
    lost: HashSet<JobId>,
}

impl Held {
    fn keep(&mut self, mut job: Job, now: OffsetDateTime) {
        let due = *job.next_poll_at.get_or_insert(now);
        self.schedule.insert((due, job.id));
        self.jobs.insert(job.id, job);
    }

    fn take_due(&mut self, now: OffsetDateTime) -> Option<Job> {
        let first = *self.schedule.first()?;
        if first.0 > now {
            return None;
        }
        self.schedule.remove(&first);
        self.advancing.insert(first.1);
        self.jobs.remove(&first.1)
    }

    fn all_ids(&self) -> Vec<JobId> {
        self.jobs.keys().chain(&self.advancing).copied().collect()
    }

    fn next_due(&self) -> Option<OffsetDateTime> {
        self.schedule.first().map(|(at, _)| *at)
    }

    /// Lets go of every waiting job not in `kept`. A job being advanced is let go when its step
    /// ends, if it was not kept.
    fn release_all_but(&mut self, kept: &[JobId]) {
        let kept: HashSet<_> = kept.iter().collect();
        self.jobs.retain(|id, _| kept.contains(id));
        let jobs = &self.jobs;
        self.schedule.retain(|(_, id)| jobs.contains_key(id));
        self.lost.extend(self.advancing.iter().filter(|id| !kept.contains(id)));
    }

    fn forget(&mut self, id: JobId) {
        if let Some(due) = self.jobs.remove(&id).and_then(|job| job.next_poll_at) {
            self.schedule.remove(&(due, id));
        }
    }

    fn finished_step(&mut self, id: JobId, kept: Option<Job>, now: OffsetDateTime) {
        self.advancing.remove(&id);
        let lost = self.lost.remove(&id);
        if let (Some(job), false) = (kept, lost) {
            self.keep(job, now);
        }
    }
}

impl JobDriver {
    /// A driver over `ports`.
    #[must_use]
    pub fn new(ports: Ports, catalog: Arc<Catalog>, settings: DriverSettings) -> Self {
        Self { ports, catalog, settings }
    }

    /// Runs until dropped: claims due jobs, advances each held job at its time (at most
    /// `max_in_flight` at once) and renews the leases of what it holds.
    pub async fn run(&self) {
        let mut held = Held::default();
        let mut in_flight = FuturesUnordered::new();
        let mut changes = self.ports.events.subscribe_all();
        let now = self.ports.clock.now();
        let (mut next_claim, mut next_renewal) = (now, now + self.settings.lease / 3);
        loop {
            let now = self.ports.clock.now();
            if now >= next_claim {
                next_claim = now + self.settings.idle_tick;
                if held.jobs.len() + in_flight.len() < self.settings.max_held {
                    match self.ports.jobs.claim_due(now, now + self.settings.lease, self.settings.batch).await {
                        Ok(jobs) => {
                            if jobs.len() == self.settings.batch {
                                next_claim = now;
                            }
                            for job in jobs {
                                held.keep(job, now);
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "could not claim due jobs"),
                    }
                }
            }
            if now >= next_renewal {
                next_renewal = now + self.settings.lease / 3;
                self.renew(&mut held).await;
            }
            while in_flight.len() < self.settings.max_in_flight {
                let Some(job) = held.take_due(self.ports.clock.now()) else { break };
                let id = job.id;
                in_flight.push(async move { (id, self.advance(job).await) });
            }
            let wake_at = [Some(next_claim), Some(next_renewal), held.next_due()].into_iter().flatten().min();
            let nap = wake_at.map_or(self.settings.idle_tick, |at| {
                Duration::try_from(at - self.ports.clock.now()).unwrap_or_default()
            });
            let step_done = async {
                if in_flight.is_empty() { futures_util::future::pending().await } else { in_flight.next().await }
            };
            let woke = {
                let timer = pin!(self.ports.clock.sleep(nap));
                let timer_or_change = pin!(select(timer, changes.next()));
                match select(pin!(step_done), timer_or_change).await {
                    Either::Left((Some((id, kept)), _)) => Woke::Stepped(id, kept.map(Box::new)),
                    Either::Right((Either::Right((Some(changed), _)), _)) => Woke::Changed(changed),
                    _ => Woke::Timer,
                }
            };
            match woke {
                Woke::Stepped(id, kept) => held.finished_step(id, kept.map(|job| *job), self.ports.clock.now()),
                Woke::Changed(id) => self.let_go_if_final(&mut held, id).await,
                Woke::Timer => {}
            }
        }
    }

    /// A held job changed elsewhere (canceled, most likely): stop polling it if it is final.
    async fn let_go_if_final(&self, held: &mut Held, id: JobId) {
        if !held.jobs.contains_key(&id) {
            return;
        }
        if let Ok(stored) = self.ports.jobs.job(id).await
            && stored.is_none_or(|job| job.state.is_final())
        {
            held.forget(id);
        }
    }

    /// Extends the leases of every held job, those being advanced included; jobs the store no
    /// longer counts as this driver's (finished or canceled meanwhile) are let go.
    async fn renew(&self, held: &mut Held) {
        let ids = held.all_ids();
        if ids.is_empty() {
            return;
        }
        let now = self.ports.clock.now();
        match self.ports.jobs.renew_leases(ids, now, now + self.settings.lease).await {
            Ok(still_open) => {
                held.release_all_but(&still_open);
                tracing::debug!(held = held.jobs.len(), advancing = held.advancing.len(), "leases renewed");
            }
            Err(e) => tracing::warn!(error = %e, "could not renew leases; other replicas may take jobs over"),
        }
    }

    /// Advances one held job by one step and commits what changed. Returns the job to keep
    /// holding (with its next poll time), or `None` when it is final or no longer this driver's.
    pub async fn advance(&self, job: Job) -> Option<Job> {
        let now = self.ports.clock.now();
        if now - job.created_at >= self.settings.job_timeout {
            let error = JobError::new(JobErrorCode::UpstreamTimeout, "the job did not finish in time");
            return self.commit(&job, Trigger::Failed { error }).await;
        }
        match job.upstream.clone() {
            None if job.submit_attempted => {
                let error = JobError::new(
                    JobErrorCode::UpstreamFailed,
                    "the submission was interrupted; it is not repeated so that it never runs twice",
                );
                self.commit(&job, Trigger::Failed { error }).await
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
                self.commit(&job, trigger).await
            }
        }
    }

    async fn submit(&self, job: Job) -> Option<Job> {
        let Some(model) = self.catalog.model(job.model.as_str()) else {
            let error = JobError::new(JobErrorCode::UpstreamFailed, "the model is no longer offered");
            return self.commit(&job, Trigger::Failed { error }).await;
        };
        let in_flight_until = self.ports.clock.now() + self.settings.lease;
        let job = self.commit(&job, Trigger::SubmitStarted { next_poll_at: in_flight_until }).await?;
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
        self.commit(&job, trigger).await
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

    /// Commits `trigger` on `job`; returns the job to keep holding, or `None` when it is final
    /// or changed meanwhile (canceled, say: a late provider answer is discarded). A poll that
    /// changes nothing a client can see is not written at all: the next poll time lives in this
    /// driver's memory while it holds the job.
    async fn commit(&self, job: &Job, trigger: Trigger) -> Option<Job> {
        let name = trigger.name();
        let transition = match job.apply(trigger, self.ports.clock.now()) {
            Ok(t) => t,
            Err(e) => {
                tracing::info!(job_id = %job.id, trigger = name, reason = %e, "provider event discarded");
                return None;
            }
        };
        if transition.recomputable && transition.job.same_observable_state(job) {
            return Some(Job { version: job.version, ..transition.job });
        }
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
                (!stored.state.is_final()).then_some(stored)
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
