//! Notifications the provider pushes when a job ends (webhooks): verified by the provider
//! adapter, then applied exactly as the driver applies a poll's answer, by compare-and-set, so
//! that a duplicate delivery, a delivery racing a poll or one arriving after a cancel moves no
//! credit twice.

use std::sync::Arc;

use super::Ports;
use super::outputs::keep_outputs;
use super::steps::ending_trigger;
use crate::job::{JobState, TransitionError};
use crate::ports::{
    Clock, Commit, Delivery, JobEvents, JobStore, NotificationRejected, OutputStore, StoreError, UpstreamProvider,
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

/// What the provider pushes.
#[derive(Clone)]
pub struct ProviderNotifications {
    ports: NotificationPorts,
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
        Self { ports }
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
        let report = self.ports.upstream.read_notification(delivery, self.ports.clock.now()).await?;
        let mut job = self.ports.jobs.job_by_upstream_key(&report.key).await?.ok_or(NotificationError::UnknownJob)?;
        if job.state().is_final() {
            return Ok(NotificationOutcome::AlreadyFinal(job.state()));
        }
        let outcome = match report.outcome {
            Ok(outputs) if !outputs.is_empty() => {
                Ok(keep_outputs(self.ports.outputs.as_ref(), self.ports.clock.as_ref(), job.id(), outputs).await)
            }
            other => other,
        };
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
                        credits_actual = ?stored.credits_actual().map(|c| c.get()),
                        error_code = ?stored.error().as_ref().map(|e| e.code),
                        "job {name} (provider notification)"
                    );
                    super::telemetry::job_finished(&stored);
                    self.ports.events.publish(stored.id()).await;
                    return Ok(NotificationOutcome::Applied(stored.state()));
                }
                Commit::Stale(current) if current.state().is_final() => {
                    return Ok(NotificationOutcome::AlreadyFinal(current.state()));
                }
                Commit::Stale(current) => job = current,
                Commit::Missing => return Err(NotificationError::UnknownJob),
            }
        }
        Err(StoreError::Internal(format!("job {} kept changing while a notification was applied", job.id())).into())
    }
}
