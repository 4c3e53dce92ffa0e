//! The job driver: moves every job forward from what the provider says. Each driver claims due
//! jobs from the store under a lease, holds them in memory, and polls each at its cadence; it
//! writes to the store only what a client can see (a new state, new progress, a submission, a
//! final result), and renews the leases of everything it holds in one batch every third of a
//! lease. Several replicas share the work this way without doing a job twice, and a replica that
//! dies has its jobs claimed by another once their leases run out. Waiters never poll the
//! provider themselves; they wake on the events this driver publishes.
//!
//! Jobs accepted by this process come straight from its gateway ([`JobDriver::handoff`]),
//! already leased to this driver and marked as being submitted, so that a fresh job costs no
//! claim and no write before it is sent.

use std::collections::HashMap;
use std::pin::pin;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use futures_util::future::{Either, select};
use futures_util::stream::{self, FuturesUnordered, StreamExt};
use time::OffsetDateTime;

mod held;
mod outcome;
mod settings;
mod timeout;

use held::Held;
pub(crate) use outcome::ending_trigger;
pub use settings::DriverSettings;

use super::Ports;
use super::handoff::{self, Handoff, Inbox};
use crate::catalog::LiveCatalog;
use crate::ids::JobId;
use crate::job::{Job, JobError, JobErrorCode, Trigger};
use crate::ports::{PollFailure, StoreError, SubmitFailure, UpstreamStatus, WATCH_TTL};

/// Back-off cap: a job whose provider keeps failing transiently is polled at most every
/// 16 intervals.
const MAX_BACKOFF_EXPONENT: u32 = 4;

/// Progress is estimated against this when the catalog no longer knows the model.
const FALLBACK_RUN_SECS: u32 = 60;

/// When a job in hand was due, and how long until its next poll.
#[derive(Debug, Clone, Copy)]
struct Cadence {
    due: OffsetDateTime,
    interval: Duration,
}

/// Moves jobs forward.
#[derive(Clone)]
pub struct JobDriver {
    ports: Ports,
    catalog: LiveCatalog,
    settings: DriverSettings,
    handoff: Handoff,
    inbox: Inbox,
}

/// What the driver's loop was waiting for.
enum Done {
    /// A claim of due jobs.
    Claimed(Result<Vec<Job>, StoreError>),
    /// A renewal of the leases of the jobs sent; those still held.
    Renewed(Vec<JobId>, Result<Vec<JobId>, StoreError>),
    /// A job's step ended; the job to keep holding, if any.
    Stepped(JobId, Option<Box<Job>>),
    /// A job changed elsewhere; whether it is final now.
    Checked(JobId, bool),
}

/// What the driver hears from waiters and other writers.
enum Signal {
    /// A job changed elsewhere.
    Changed(JobId),
    /// Someone waits on a job.
    Watched(JobId),
    /// This process's gateway accepted a job for this driver.
    Handed(Box<Job>),
}

impl JobDriver {
    /// A driver over `ports`.
    #[must_use]
    pub fn new(ports: Ports, catalog: impl Into<LiveCatalog>, settings: DriverSettings) -> Self {
        let catalog = catalog.into();
        let (handoff, inbox) = handoff::channel(settings.lease);
        Self { ports, catalog, settings, handoff, inbox }
    }

    /// The way for a [`super::Gateway`] of the same process to pass this driver the jobs it
    /// accepts ([`super::Gateway::with_handoff`]). The first run of this driver takes them; once
    /// it stops, the gateway accepts jobs for any driver again.
    #[must_use]
    pub fn handoff(&self) -> Handoff {
        self.handoff.clone()
    }

    /// Runs until dropped: claims due jobs, advances each held job at its time (at most
    /// `max_in_flight` at once) and renews the leases of what it holds.
    ///
    /// Everything the loop waits for (claims, renewals, steps, checks) is one set of futures
    /// polled together, so that no step holding a database connection starves while the loop
    /// waits for another.
    pub async fn run(&self) {
        self.run_until(futures_util::future::pending()).await;
    }

    /// As [`JobDriver::run`] until `shutdown` completes; then drains: claims nothing more and
    /// starts no step, lets the steps in flight end (a provider call is never cut in half), and
    /// hands every held job back ([`crate::ports::JobStore::release_leases`]) so that another
    /// replica takes it over at once rather than after a lease; handed jobs not yet sent are
    /// withdrawn first, so that the next driver sends them.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) {
        let mut shutdown = pin!(shutdown.fuse());
        let mut draining = false;
        let mut held = Held::default();
        let mut work: FuturesUnordered<BoxFuture<'_, Done>> = FuturesUnordered::new();
        let mut inbox = self.inbox.take();
        let handed = match inbox.as_mut() {
            Some(jobs) => jobs.map(Signal::Handed).left_stream(),
            None => stream::empty().right_stream(),
        };
        let mut signals = stream::select(
            stream::select(
                self.ports.events.subscribe_all().map(Signal::Changed),
                self.ports.events.subscribe_watches().map(Signal::Watched),
            ),
            handed,
        );
        let mut watched: HashMap<JobId, OffsetDateTime> = HashMap::new();
        let (mut claiming, mut renewing, mut advancing) = (false, false, 0usize);
        let now = self.ports.clock.now();
        let (mut next_claim, mut next_renewal) = (now, now + self.settings.lease / 3);
        loop {
            let now = self.ports.clock.now();
            if draining && work.is_empty() {
                break;
            }
            if !draining && !claiming && now >= next_claim && held.jobs.len() + advancing < self.settings.max_held {
                claiming = true;
                let until = now + self.settings.lease;
                work.push(
                    async move { Done::Claimed(self.ports.jobs.claim_due(now, until, self.settings.batch).await) }
                        .boxed(),
                );
            }
            if !renewing && now >= next_renewal {
                renewing = true;
                watched.retain(|_, until| *until > now);
                let ids = held.all_ids();
                let until = now + self.settings.lease;
                work.push(
                    async move {
                        let renewed = self.ports.jobs.renew_leases(ids.clone(), now, until).await;
                        Done::Renewed(ids, renewed)
                    }
                    .boxed(),
                );
            }
            while !draining && advancing < self.settings.max_in_flight {
                let Some((due, job, handed)) = held.take_due(now) else { break };
                if let Some(lag) = job.next_poll_at().and_then(|due| Duration::try_from(now - due).ok()) {
                    super::telemetry::driver_lag(lag);
                }
                advancing += 1;
                let id = job.id();
                let interval = self.interval(watched.get(&id).is_some_and(|until| *until > now));
                work.push(
                    async move { Done::Stepped(id, self.step(job, due, interval, handed).await.map(Box::new)) }.boxed(),
                );
            }
            // With every slot busy, a due job waits for a step to end, not for the clock.
            let due = held.next_due().filter(|_| !draining && advancing < self.settings.max_in_flight);
            let claim_at = (!claiming && !draining).then_some(next_claim);
            let renew_at = (!renewing).then_some(next_renewal);
            let wake_at = [claim_at, renew_at, due].into_iter().flatten().min();
            let nap = wake_at.map_or(self.settings.idle_tick, |at| {
                Duration::try_from(at - self.ports.clock.now()).unwrap_or_default()
            });
            let woke = {
                let finished =
                    async { if work.is_empty() { futures_util::future::pending().await } else { work.next().await } };
                let timer = pin!(self.ports.clock.sleep(nap));
                let timer_or_change = pin!(select(timer, signals.next()));
                let interrupted = pin!(select(timer_or_change, shutdown.as_mut()));
                match select(pin!(finished), interrupted).await {
                    Either::Left((Some(done), _)) => Some(done),
                    Either::Right((Either::Left((Either::Right((Some(Signal::Changed(changed)), _)), _)), _))
                        if held.jobs.contains_key(&changed) =>
                    {
                        work.push(async move { Done::Checked(changed, self.is_final(changed).await) }.boxed());
                        None
                    }
                    Either::Right((Either::Left((Either::Right((Some(Signal::Watched(id)), _)), _)), _)) => {
                        let now = self.ports.clock.now();
                        watched.insert(id, now + WATCH_TTL);
                        held.hurry(id, now);
                        None
                    }
                    Either::Right((Either::Left((Either::Right((Some(Signal::Handed(job)), _)), _)), _)) => {
                        held.keep_handed(*job, self.ports.clock.now());
                        None
                    }
                    Either::Right((Either::Right(((), _)), _)) => {
                        draining = true;
                        self.inbox.shut();
                        None
                    }
                    _ => None,
                }
            };
            let now = self.ports.clock.now();
            match woke {
                Some(Done::Claimed(claimed)) => {
                    claiming = false;
                    next_claim = now + self.settings.idle_tick;
                    match claimed {
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
                Some(Done::Renewed(sent, renewed)) => {
                    renewing = false;
                    next_renewal = now + self.settings.lease / 3;
                    match renewed {
                        Ok(still_open) => held.release_unrenewed(&sent, &still_open),
                        Err(e) => {
                            tracing::warn!(error = %e, "could not renew leases; other replicas may take jobs over")
                        }
                    }
                }
                Some(Done::Stepped(id, kept)) => {
                    advancing -= 1;
                    held.finished_step(id, kept.map(|job| *job), now);
                    if watched.get(&id).is_some_and(|until| *until > now) {
                        held.hurry(id, now + self.settings.poll_interval);
                    }
                }
                Some(Done::Checked(id, true)) => held.forget(id),
                Some(Done::Checked(_, false)) | None => {}
            }
        }
        drop(signals);
        let mut unsent = held.take_unsent();
        if let Some(jobs) = inbox.as_mut() {
            jobs.close();
            while let Ok(job) = jobs.try_recv() {
                unsent.push(*job);
            }
        }
        if !unsent.is_empty() {
            tracing::info!(jobs = unsent.len(), "driver stopping; unsent jobs withdrawn for other drivers");
            handoff::withdraw(&self.ports, unsent).await;
        }
        self.hand_back(held.all_ids()).await;
    }

    /// Releases the leases of the jobs this driver still holds as it stops.
    async fn hand_back(&self, jobs: Vec<JobId>) {
        let count = jobs.len();
        match self.ports.jobs.release_leases(jobs, self.ports.clock.now()).await {
            Ok(released) => tracing::info!(held = count, released, "driver stopped; jobs handed back"),
            Err(e) => {
                tracing::warn!(held = count, error = %e, "driver stopped; leases not released, they will run out")
            }
        }
    }

    /// Whether a job changed elsewhere is final (canceled, most likely), so that the driver
    /// stops polling it.
    async fn is_final(&self, id: JobId) -> bool {
        matches!(self.ports.jobs.job(id).await, Ok(stored) if stored.as_ref().is_none_or(|job| job.state().is_final()))
    }

    /// The time between two polls of a job: the poll interval while someone watches it or when
    /// the provider does not notify, the unwatched interval otherwise.
    fn interval(&self, watched: bool) -> Duration {
        match self.settings.unwatched_poll_interval {
            Some(unwatched) if !watched => unwatched,
            _ => self.settings.poll_interval,
        }
    }

    /// Advances one held job by one step and commits what changed. Returns the job to keep
    /// holding (with its next poll time), or `None` when it is final or no longer this driver's.
    pub async fn advance(&self, job: Job) -> Option<Job> {
        let due = job.next_poll_at().unwrap_or_else(|| self.ports.clock.now());
        self.step(job, due, self.settings.poll_interval, false).await
    }

    /// [`JobDriver::advance`] for a job that was due at `due`, polled every `interval`; `handed`
    /// when it came from this process's gateway and was not sent yet, its submission's start
    /// being recorded by the accept.
    async fn step(&self, job: Job, due: OffsetDateTime, interval: Duration, handed: bool) -> Option<Job> {
        let cadence = Cadence { due, interval };
        let now = self.ports.clock.now();
        if now - job.created_at() >= self.settings.job_timeout {
            return self.time_out(&job).await;
        }
        match job.upstream() {
            None if job.submit_attempted() && !handed => {
                let error = JobError::new(
                    JobErrorCode::UpstreamFailed,
                    "the submission was interrupted; it is not repeated so that it never runs twice",
                );
                self.commit(&job, Trigger::Failed { error }).await
            }
            None => self.submit(job, cadence, handed).await,
            Some(upstream) => {
                let trigger = match self.ports.upstream.status(job.id(), upstream).await {
                    Ok(UpstreamStatus::Queued { position }) => {
                        Trigger::UpstreamQueued { position, next_poll_at: self.next_poll(cadence, 0) }
                    }
                    Ok(UpstreamStatus::Running { percent }) => Trigger::UpstreamRunning {
                        progress: self.progress(&job, percent),
                        next_poll_at: self.next_poll(cadence, 0),
                    },
                    Ok(UpstreamStatus::Completed) => {
                        let fetched = match self.ports.upstream.result(job.id(), upstream, job.modality()).await {
                            Ok(outputs) if !outputs.is_empty() => {
                                Ok(super::outputs::keep_outputs(&self.ports, job.id(), outputs).await)
                            }
                            other => other,
                        };
                        self.result(&job, cadence, fetched)
                    }
                    Ok(UpstreamStatus::Failed(failure)) => self.result(&job, cadence, Err(failure)),
                    Err(PollFailure::Transient(reason)) => {
                        tracing::warn!(job_id = %job.id(), %reason, "status poll failed; backing off");
                        Trigger::UpstreamUnreachable { next_poll_at: self.next_poll(cadence, job.poll_failures() + 1) }
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

    /// Sends a job to the provider. The start is recorded first, durably, unless the accept
    /// recorded it (`started`): from then on the job may exist at the provider.
    async fn submit(&self, job: Job, cadence: Cadence, started: bool) -> Option<Job> {
        // A job runs on the model it was accepted for even if the operator disabled or deleted
        // it since: the catalog keeps deleted models' documents for that.
        let catalog = self.catalog.current();
        let Some(model) = catalog.any_model(job.model().as_str()) else {
            let error = JobError::new(JobErrorCode::UpstreamFailed, "the model is unknown to this catalog");
            return self.commit(&job, Trigger::Failed { error }).await;
        };
        let job = if started {
            job
        } else {
            let in_flight_until = self.ports.clock.now() + self.settings.lease;
            self.commit(&job, Trigger::SubmitStarted { next_poll_at: in_flight_until }).await?
        };
        let trigger = match self.ports.upstream.submit(job.id(), model, job.input()).await {
            Ok(upstream) => {
                tracing::info!(job_id = %job.id(), model = %model.id, "submitted upstream");
                let next_poll_at = self.ports.clock.now() + cadence.interval;
                let submitted = Trigger::Submitted { upstream, next_poll_at };
                return self.commit_submission(&job, submitted).await;
            }
            Err(SubmitFailure::NotReached(reason)) => {
                tracing::warn!(job_id = %job.id(), %reason, "provider not reached; will submit again");
                Trigger::SubmitNotReached { next_poll_at: self.next_poll(cadence, job.poll_failures() + 1) }
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
}
