//! The job driver: moves every job forward from what the provider says. Each driver claims due
//! jobs from the store under a lease, holds them in memory (`held.rs`), and steps each at its
//! cadence ([`JobSteps::step`], the domain's use case). Every job it holds is under one lease of
//! its own, which it renews every third of a lease: one row, however many jobs it holds. Several
//! replicas share the work this way without doing a job twice, and a replica that dies has its
//! jobs claimed by another once its lease runs out. A job the driver lets go of while its lease
//! lives (a commit that failed, a task that panicked) is freed by the next renewal, which sends
//! the ids the driver holds. Should this driver's lease run out (the database out of reach for a
//! lease), it lets go of everything and goes on under a new one.
//! Waiters never poll the provider themselves; they wake on the events the steps publish.
//!
//! Jobs accepted by this process come straight from its gateway ([`JobDriver::handoff`]),
//! already under this driver's lease and marked as being submitted, so that a fresh job costs no
//! claim and no write before it is sent.
//!
//! Claims, renewals, steps and checks are tasks of one [`JoinSet`], so that they run in parallel
//! and no step holding a database connection starves while the loop waits for another; the loop
//! itself only waits (`tokio::select!`) for the first of: a task's end, the next due time, a
//! signal (a job changed elsewhere, someone watches a job, a job handed over, a slot of a
//! provider's keys freed), or the shutdown.
//!
//! A freed slot wakes only the held jobs it goes to: the driver asks the provider side once which
//! waiting jobs the free slots go to in fair order ([`UpstreamProvider::next_in_line`]) and
//! hurries those it holds, so that a backlog of N waiting jobs costs one read per freed slot,
//! not N steps each taking the provider's lock. A burst of frees is coalesced: one question in
//! flight, one more after it when woken meanwhile. Every waiting job still looks again once a
//! lease, should a wake be lost. The same question wakes the batch items waiting for their
//! owner's room that a job's end made room for: they rest in the store, held by no driver,
//! until woken so (or by the batch windows' look every second), and are claimed at once.

mod handoff;
mod held;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use genjobs_domain::catalog::LiveCatalog;
use genjobs_domain::ids::{JobId, LeaseId};
use genjobs_domain::job::Job;
#[cfg(doc)]
use genjobs_domain::ports::UpstreamProvider;
use genjobs_domain::ports::{JobHandoff, StoreError, WATCH_TTL};
use genjobs_domain::usecases::{Cadence, JobSteps, Moderator, Ports, Stepped};
use time::OffsetDateTime;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinSet;

use crate::settings::DriverSettings;
use handoff::{Handoff, Inbox};
use held::Held;

/// Moves jobs forward.
#[derive(Clone)]
pub struct JobDriver {
    steps: Arc<JobSteps>,
    settings: DriverSettings,
    handoff: Arc<Handoff>,
    inbox: Inbox,
}

/// A task of the loop that ended, with what it found.
enum Done {
    /// A claim of due jobs.
    Claimed(Result<Vec<Job>, StoreError>),
    /// A start or renewal of the driver's lease: until when it lives and the held jobs it does
    /// not cover, or `None` when it ran out.
    Leased(Result<Option<(OffsetDateTime, Vec<JobId>)>, StoreError>),
    /// A job's step ended; the job to keep holding, if any.
    Stepped(JobId, Option<Box<Job>>),
    /// A job changed elsewhere; whether it is final now.
    Checked(JobId, bool),
    /// The waiting jobs that the free slots go to, on any replica.
    NextInLine(Result<Vec<JobId>, StoreError>),
}

/// What the loop's wait ended on.
enum Woke {
    /// A task ended.
    Done(Done),
    /// A job changed elsewhere.
    Changed(JobId),
    /// Someone waits on a job.
    Watched(JobId),
    /// This process's gateway accepted a job for this driver.
    Handed(Box<Job>),
    /// A job that held a slot of a provider's keys ended, on any replica.
    SlotFreed,
    /// The next due time came.
    Timer,
    /// The service stops.
    Shutdown,
}

impl JobDriver {
    /// A driver over `ports`.
    #[must_use]
    pub fn new(ports: Ports, catalog: impl Into<LiveCatalog>, settings: DriverSettings) -> Self {
        let (handoff, inbox) = handoff::channel(settings.steps.lease);
        let steps = Arc::new(JobSteps::new(ports, catalog, settings.steps));
        Self { steps, settings, handoff, inbox }
    }

    /// The same driver, checking every unsent job with `moderator` before it is sent; the
    /// waits between checks of a service that cannot answer are this driver's schedule.
    #[must_use]
    pub fn with_moderator(self, moderator: Moderator) -> Self {
        let steps = Arc::new(JobSteps::clone(&self.steps).with_moderator(moderator));
        Self { steps, ..self }
    }

    /// The way for the submissions of the same process to pass this driver the jobs they accept
    /// ([`genjobs_domain::usecases::Submissions::with_handoff`]). The first run of this driver
    /// takes them; once it stops, submissions accept jobs for any driver again.
    #[must_use]
    pub fn handoff(&self) -> Arc<dyn JobHandoff> {
        self.handoff.clone()
    }

    /// Runs until dropped: claims due jobs, advances each held job at its time (at most
    /// `max_in_flight` at once) and renews its lease.
    pub async fn run(&self) {
        self.run_until(std::future::pending()).await;
    }

    /// As [`JobDriver::run`] until `shutdown` completes; then drains: claims nothing more and
    /// starts no step, lets the steps in flight end (a provider call is never cut in half), and
    /// ends its lease so that another replica takes every held job over at once rather than after
    /// a lease; handed jobs not yet sent are withdrawn first, so that the next driver sends them.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) {
        let ports = self.steps.ports();
        let length = self.settings.steps.lease;
        let mut shutdown = pin!(shutdown);
        let mut draining = false;
        let mut held = Held::default();
        let mut work: JoinSet<Done> = JoinSet::new();
        let (mut inbox, mut lease) = match self.inbox.take() {
            Some((inbox, lease)) => (Some(inbox), lease),
            None => (None, LeaseId::new_at(ports.clock.now())),
        };
        let handing = inbox.is_some();
        let mut lives_until: Option<OffsetDateTime> = None;
        let mut changes = ports.events.subscribe_all();
        let mut watches = ports.events.subscribe_watches();
        let mut freed = ports.events.subscribe_capacity();
        let mut watched: HashMap<JobId, OffsetDateTime> = HashMap::new();
        let (mut claiming, mut renewing, mut advancing) = (false, false, 0usize);
        // A question of who is next in line is in flight; another slot freed meanwhile.
        let (mut asking, mut ask_again) = (false, false);
        // Jobs were woken while a claim was in flight: that claim may have missed them, so the
        // next one starts as soon as it ends rather than a tick later.
        let mut claim_again = false;
        let now = ports.clock.now();
        let (mut next_claim, mut next_renewal) = (now, now);
        loop {
            let now = ports.clock.now();
            if draining && work.is_empty() {
                break;
            }
            let leased = lives_until.is_some_and(|until| until > now);
            // A claim and a renewal never run side by side: jobs claimed meanwhile would be
            // under the lease but not among the held jobs the renewal reconciles.
            if !draining
                && leased
                && !claiming
                && !renewing
                && now >= next_claim
                && held.jobs.len() + advancing < self.settings.max_held
            {
                claiming = true;
                let (jobs, batch) = (Arc::clone(&ports.jobs), self.settings.batch);
                spawn(&mut work, Done::Claimed(Err(panicked())), async move {
                    Done::Claimed(jobs.claim_due(lease, now, batch).await)
                });
            }
            // A draining driver starts no lease; it renews the one it has while steps end.
            let renewal_due = now >= next_renewal && (lives_until.is_some() || !draining);
            if !renewing && !claiming && renewal_due {
                renewing = true;
                watched.retain(|_, until| *until > now);
                let (jobs, until) = (Arc::clone(&ports.jobs), now + length);
                // Jobs accepted in the last third of a lease are never freed as strays: a job
                // handed over may still be on its way here.
                let held_ids = lives_until.is_some().then(|| held.all_ids());
                spawn(&mut work, Done::Leased(Err(panicked())), async move {
                    let lives = match held_ids {
                        Some(ids) => jobs.renew_lease(lease, ids, now - length / 3, now, until).await,
                        None => jobs.start_lease(lease, now, until).await.map(|()| Some(Vec::new())),
                    };
                    Done::Leased(lives.map(|lives| lives.map(|not_covered| (until, not_covered))))
                });
            }
            while !draining && advancing < self.settings.max_in_flight {
                let Some((due, job, handed)) = held.take_due(now) else { break };
                if let Some(lag) = job.next_poll_at().and_then(|due| Duration::try_from(now - due).ok()) {
                    crate::telemetry::driver_lag(lag);
                }
                advancing += 1;
                let id = job.id();
                let cadence =
                    Cadence { due, interval: self.interval(watched.get(&id).is_some_and(|until| *until > now)) };
                let steps = Arc::clone(&self.steps);
                spawn(&mut work, Done::Stepped(id, None), async move {
                    Done::Stepped(id, step(&steps, job, cadence, handed).await.map(Box::new))
                });
            }
            // With every slot busy, a due job waits for a step to end, not for the clock.
            let due = held.next_due().filter(|_| !draining && advancing < self.settings.max_in_flight);
            let claim_at = (!claiming && !draining).then_some(next_claim);
            let renew_at = (!renewing).then_some(next_renewal);
            let wake_at = [claim_at, renew_at, due].into_iter().flatten().min();
            let nap = wake_at
                .map_or(self.settings.idle_tick, |at| Duration::try_from(at - ports.clock.now()).unwrap_or_default());
            let woke = tokio::select! {
                biased;
                Some(ended) = work.join_next(), if !work.is_empty() => match ended {
                    Ok(done) => Woke::Done(done),
                    Err(e) => {
                        tracing::error!(error = %e, "a driver task was cancelled; the driver stops");
                        break;
                    }
                },
                () = ports.clock.sleep(nap) => Woke::Timer,
                Some(id) = changes.next() => Woke::Changed(id),
                Some(id) = watches.next() => Woke::Watched(id),
                Some(()) = freed.next() => Woke::SlotFreed,
                Some(job) = next_handed(&mut inbox) => Woke::Handed(job),
                () = &mut shutdown, if !draining => Woke::Shutdown,
            };
            let now = ports.clock.now();
            match woke {
                Woke::Changed(changed) if held.holds(changed) => {
                    let steps = Arc::clone(&self.steps);
                    spawn(&mut work, Done::Checked(changed, false), async move {
                        Done::Checked(changed, steps.is_final(changed).await)
                    });
                }
                Woke::Watched(id) => {
                    watched.insert(id, now + WATCH_TTL);
                    held.hurry(id, now);
                }
                Woke::Handed(job) => held.keep_handed(*job, now),
                Woke::SlotFreed if asking => ask_again = true,
                Woke::SlotFreed => {
                    asking = !draining;
                    if asking {
                        self.ask_next_in_line(&mut work);
                    }
                }
                Woke::Done(Done::NextInLine(next)) => {
                    match next {
                        Ok(ids) => {
                            // A woken batch item is most often held by no driver: claim it now
                            // rather than at the next claim's time.
                            if ids.iter().any(|id| !held.holds(*id)) {
                                next_claim = now;
                                claim_again = claiming;
                            }
                            for id in ids {
                                held.call(id, now);
                            }
                        }
                        // Each waiting job looks again within a lease anyway.
                        Err(e) => tracing::warn!(error = %e, "could not read which waiting jobs the free slots go to"),
                    }
                    asking = ask_again && !draining;
                    ask_again = false;
                    if asking {
                        self.ask_next_in_line(&mut work);
                    }
                }
                Woke::Shutdown => {
                    draining = true;
                    self.inbox.shut();
                }
                Woke::Done(Done::Claimed(claimed)) => {
                    claiming = false;
                    next_claim = if std::mem::take(&mut claim_again) { now } else { now + self.settings.idle_tick };
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
                Woke::Done(Done::Leased(lives)) => {
                    renewing = false;
                    next_renewal = now + length / 3;
                    match lives {
                        Ok(Some((until, not_covered))) => {
                            lives_until = Some(until);
                            for id in not_covered {
                                held.forget(id);
                            }
                        }
                        Ok(None) => {
                            tracing::warn!(%lease, held = held.count(), "the driver's lease ran out; its jobs are let go for any driver");
                            held.let_go_all();
                            lease = LeaseId::new_at(now);
                            lives_until = None;
                            next_renewal = now;
                            if handing {
                                self.inbox.lease_under(lease);
                            }
                        }
                        Err(e) if lives_until.is_none() => {
                            tracing::warn!(error = %e, "could not start the driver's lease; nothing is claimed until it starts");
                            next_renewal = now + self.settings.idle_tick;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "could not renew the driver's lease; other replicas may take its jobs over")
                        }
                    }
                }
                Woke::Done(Done::Stepped(id, kept)) => {
                    advancing -= 1;
                    held.finished_step(id, kept.map(|job| *job), now);
                    if watched.get(&id).is_some_and(|until| *until > now) {
                        held.hurry(id, now + self.settings.steps.poll_interval);
                    }
                }
                Woke::Done(Done::Checked(id, true)) => held.forget(id),
                Woke::Done(Done::Checked(_, false)) | Woke::Changed(_) | Woke::Timer => {}
            }
        }
        drop((changes, watches, freed));
        let mut unsent = held.take_unsent();
        if let Some(jobs) = inbox.as_mut() {
            jobs.close();
            while let Ok(job) = jobs.try_recv() {
                unsent.push(*job);
            }
        }
        if !unsent.is_empty() {
            tracing::info!(jobs = unsent.len(), "driver stopping; unsent jobs withdrawn for other drivers");
            self.steps.withdraw(unsent).await;
        }
        if lives_until.is_some() {
            self.steps.hand_back(lease, held.count()).await;
        }
    }

    /// Asks which waiting jobs the free slots go to, and wakes the batch items the room their
    /// owners have now goes to, as a task of the loop.
    fn ask_next_in_line(&self, work: &mut JoinSet<Done>) {
        let upstream = Arc::clone(&self.steps.ports().upstream);
        let batches = Arc::clone(&self.steps.ports().batches);
        let (limit, now) = (self.settings.batch, self.steps.ports().clock.now());
        spawn(work, Done::NextInLine(Err(panicked())), async move {
            let next = match upstream.next_in_line().await {
                Ok(mut next) => batches.wake_admissible(now, limit).await.map(|admissible| {
                    next.extend(admissible);
                    next
                }),
                Err(e) => Err(e),
            };
            Done::NextInLine(next)
        });
    }

    /// The time between two polls of a job: the poll interval while someone watches it or when
    /// the provider does not notify, the unwatched interval otherwise.
    fn interval(&self, watched: bool) -> Duration {
        match self.settings.unwatched_poll_interval {
            Some(unwatched) if !watched => unwatched,
            _ => self.settings.steps.poll_interval,
        }
    }
}

/// Runs `task` on the loop's set; should it panic, the loop is told `instead`, so that what it
/// counts (claims, renewals, steps in flight) stays true and the driver goes on.
/// One step of a job, with the waits it asks for: a submission the store did not record is
/// recorded again after the step's back-off, the job held meanwhile.
async fn step(steps: &JobSteps, job: Job, cadence: Cadence, handed: bool) -> Option<Job> {
    let mut stepped = steps.step(job, cadence, handed).await;
    loop {
        match stepped {
            Stepped::Done(kept) => return kept,
            Stepped::Unrecorded(unrecorded) => {
                steps.ports().clock.sleep(unrecorded.retry_in()).await;
                stepped = steps.record_submission(unrecorded).await;
            }
        }
    }
}

/// Runs `task` in `work`, `instead` as its end if it panics. The task is boxed first: a step's
/// future is kilobytes, which the runtime would otherwise copy as it spawns, polls and ends it
/// (a tenth of the driver's instructions per job).
fn spawn(work: &mut JoinSet<Done>, instead: Done, task: impl Future<Output = Done> + Send + 'static) {
    work.spawn(AssertUnwindSafe(Box::pin(task)).catch_unwind().map(|ended| {
        ended.unwrap_or_else(|_| {
            tracing::error!("a driver task panicked; its job is let go, and the next lease renewal frees it");
            instead
        })
    }));
}

fn panicked() -> StoreError {
    StoreError::Internal("the task panicked".into())
}

/// The next job handed over by this process's submissions; never, for a run without the inbox.
async fn next_handed(inbox: &mut Option<UnboundedReceiver<Box<Job>>>) -> Option<Box<Job>> {
    match inbox {
        Some(jobs) => jobs.recv().await,
        None => std::future::pending().await,
    }
}
