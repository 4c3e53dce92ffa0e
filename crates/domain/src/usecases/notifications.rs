//! Notifications the provider pushes when a job ends (webhooks): verified by the provider
//! adapter, then applied exactly as the driver applies a poll's answer, by compare-and-set, so
//! that a duplicate delivery, a delivery racing a poll or one arriving after a cancel moves no
//! credit twice. A delivery whose signed id this process has answered before is refused as a
//! replay (another replica finds its job final and changes nothing).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use time::OffsetDateTime;

use super::Ports;
use super::outputs::keep_result;
use super::steps::ending_trigger;
use crate::job::{JobState, TransitionError};
use crate::ports::{
    Clock, Commit, Delivery, JobEvents, JobStore, NotificationRejected, OutputStore, StoreError, UpstreamProvider,
    UpstreamReport,
};

/// How often a notification re-reads a job that changed under it before giving up (the provider
/// delivers it again, and the driver's polls go on meanwhile).
const APPLY_ATTEMPTS: usize = 8;

/// What a notification did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotificationOutcome {
    /// The job ended with it, in this state.
    Applied(JobState),
    /// The job had already ended (a duplicate, a poll that came first, a cancel): nothing changed.
    AlreadyFinal(JobState),
    /// It says nothing final (a transient failure at the provider): the driver's polls go on.
    Ignored,
}

/// Why a notification was refused; nothing changed for any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotificationError {
    /// The delivery was not verified or read (see [`NotificationRejected`]).
    #[error(transparent)]
    Rejected(#[from] NotificationRejected),
    /// Well signed, but no job has the provider's id it names (yet: a job whose submission is
    /// still being recorded is found on a later delivery).
    #[error("no job with this provider reference")]
    UnknownJob,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How long the id of a delivery answered once is remembered: longer than a signature stays
/// fresh (300 s either way for Standard Webhooks), so that a replay is refused until its
/// timestamp would be.
const REPLAY_WINDOW: time::Duration = time::Duration::minutes(10);

/// The ids of the deliveries answered in the last [`REPLAY_WINDOW`]. Only answered ones: a
/// delivery refused for a job not recorded yet, or for a store that failed, is applied when the
/// provider delivers it again.
#[derive(Default)]
struct Answered {
    ids: HashSet<String>,
    oldest_first: VecDeque<(OffsetDateTime, String)>,
}

impl Answered {
    fn forget_before(&mut self, cut: OffsetDateTime) {
        while let Some((at, _)) = self.oldest_first.front()
            && *at < cut
        {
            if let Some((_, id)) = self.oldest_first.pop_front() {
                self.ids.remove(&id);
            }
        }
    }

    fn contains(&mut self, id: &str, now: OffsetDateTime) -> bool {
        self.forget_before(now - REPLAY_WINDOW);
        self.ids.contains(id)
    }

    fn remember(&mut self, id: String, now: OffsetDateTime) {
        if self.ids.insert(id.clone()) {
            self.oldest_first.push_back((now, id));
        }
    }
}

/// What the provider pushes.
#[derive(Clone)]
pub struct ProviderNotifications {
    ports: NotificationPorts,
    answered: Arc<Mutex<Answered>>,
}

/// The ports of [`ProviderNotifications`].
#[derive(Clone)]
struct NotificationPorts {
    jobs: Arc<dyn JobStore>,
    upstream: Arc<dyn UpstreamProvider>,
    outputs: Option<Arc<dyn OutputStore>>,
    events: Arc<dyn JobEvents>,
    clock: Arc<dyn Clock>,
}

impl ProviderNotifications {
    /// The provider's notifications applied over `ports`.
    #[must_use]
    pub fn new(ports: &Ports) -> Self {
        let ports = NotificationPorts {
            jobs: Arc::clone(&ports.jobs),
            upstream: Arc::clone(&ports.upstream),
            outputs: ports.outputs.clone(),
            events: Arc::clone(&ports.events),
            clock: Arc::clone(&ports.clock),
        };
        Self { ports, answered: Arc::default() }
    }

    /// Whether `provider`, as a webhook's path names it, is one whose notifications are read here.
    #[must_use]
    pub fn serves(&self, provider: &str) -> bool {
        self.ports.upstream.serves(provider)
    }

    /// Verifies a notification the provider pushed and applies the end it reports to its job.
    ///
    /// # Errors
    /// See [`NotificationError`].
    pub async fn upstream_notification(&self, delivery: &Delivery) -> Result<NotificationOutcome, NotificationError> {
        let now = self.ports.clock.now();
        let mut report = self.ports.upstream.read_notification(delivery, now).await?;
        let delivery_id = report.delivery_id.take();
        if let Some(id) = &delivery_id
            && self.answered_lock().contains(id, now)
        {
            return Err(NotificationRejected::InvalidSignature(format!("the delivery {id} was received before")).into());
        }
        let applied = self.apply(report).await;
        if applied.is_ok()
            && let Some(id) = delivery_id
        {
            self.answered_lock().remember(id, now);
        }
        applied
    }

    fn answered_lock(&self) -> std::sync::MutexGuard<'_, Answered> {
        self.answered.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Applies the end `report` gives to its job.
    async fn apply(&self, report: UpstreamReport) -> Result<NotificationOutcome, NotificationError> {
        let mut job = self.ports.jobs.job_by_upstream_key(&report.key).await?.ok_or(NotificationError::UnknownJob)?;
        if job.state().is_final() {
            return Ok(NotificationOutcome::AlreadyFinal(job.state()));
        }
        let outcome = keep_result(self.ports.outputs.as_ref(), job.id(), report.outcome).await;
        for _ in 0..APPLY_ATTEMPTS {
            let Some(trigger) = ending_trigger(&job, outcome.clone()) else {
                return Ok(NotificationOutcome::Ignored);
            };
            let name = trigger.name();
            let transition = match job.apply(trigger, self.ports.clock.now()) {
                Ok(transition) => transition,
                Err(TransitionError::AlreadyFinal(state)) => return Ok(NotificationOutcome::AlreadyFinal(state)),
                Err(e @ TransitionError::NotApplicable { .. }) => {
                    return Err(StoreError::Internal(e.to_string()).into());
                }
            };
            match self.ports.jobs.commit(transition).await? {
                Commit::Applied(stored) => {
                    tracing::info!(
                        job_id = %stored.id(),
                        state = stored.state().as_str(),
                        credits_actual = stored.credits_actual().map(|c| c.get()),
                        error_code = stored.error().as_ref().map(|e| e.code.as_str()),
                        "job {name} (provider notification)"
                    );
                    super::job_ended(self.ports.events.as_ref(), &stored).await;
                    self.ports.events.publish(stored.id()).await;
                    return Ok(NotificationOutcome::Applied(stored.state()));
                }
                Commit::Stale(current) if current.state().is_final() => {
                    return Ok(NotificationOutcome::AlreadyFinal(current.state()));
                }
                // A provider's answer never admits a batch item: only a send does.
                Commit::Stale(current) | Commit::OwnerAtLimit(current) => job = current,
                Commit::Missing => return Err(NotificationError::UnknownJob),
            }
        }
        Err(StoreError::Internal(format!("job {} kept changing while a notification was applied", job.id())).into())
    }
}
