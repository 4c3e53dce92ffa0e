//! Webhooks to clients: a job submitted with a `webhook_url` has one event recorded in the
//! outbox by the same store commit that makes it final ([`crate::ports::JobStore::commit`]), and
//! a batch with one has one event recorded by the commit that makes its last item final; the
//! [`crate::usecases::WebhookDeliveries`] use case delivers it, retrying on the [`RetryPolicy`].
//! This module holds the rules: the event's id and type, what an attempt records, the retry
//! schedule. What the URL itself must look like is checked with the request, in
//! [`crate::request::check_webhook_url`]; the host it names, in [`crate::address::destination_host`].

use std::time::Duration;

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::batch::{BatchState, BatchView};
use crate::ids::{BatchId, JobId, UserId};
use crate::job::JobState;

/// What ended a job or a batch, as a webhook's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `job.succeeded`.
    Succeeded,
    /// `job.failed`.
    Failed,
    /// `job.canceled`.
    Canceled,
    /// `batch.completed`.
    BatchCompleted,
    /// `batch.expired`.
    BatchExpired,
    /// `batch.canceled`.
    BatchCanceled,
}

impl EventType {
    /// The event of a job that has become `state`; `None` while it is not final.
    #[must_use]
    pub fn of(state: JobState) -> Option<Self> {
        match state {
            JobState::Succeeded => Some(Self::Succeeded),
            JobState::Failed => Some(Self::Failed),
            JobState::Canceled => Some(Self::Canceled),
            JobState::Queued | JobState::Running => None,
        }
    }

    /// The event of a batch that has become `state`; `None` while it is in progress.
    #[must_use]
    pub fn of_batch(state: BatchState) -> Option<Self> {
        match state {
            BatchState::Completed => Some(Self::BatchCompleted),
            BatchState::Expired => Some(Self::BatchExpired),
            BatchState::Canceled => Some(Self::BatchCanceled),
            BatchState::InProgress => None,
        }
    }

    /// The `type` of the event's body.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "job.succeeded",
            Self::Failed => "job.failed",
            Self::Canceled => "job.canceled",
            Self::BatchCompleted => "batch.completed",
            Self::BatchExpired => "batch.expired",
            Self::BatchCanceled => "batch.canceled",
        }
    }

    /// The final state of the job or of the batch the event reports, by its name
    /// ([`JobState::as_str`], [`BatchState::as_str`]): how a store keeps the type.
    #[must_use]
    pub fn final_state(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Canceled | Self::BatchCanceled => "canceled",
            Self::BatchCompleted => "completed",
            Self::BatchExpired => "expired",
        }
    }

    /// Reads [`EventType::final_state`] back, for an event of `subject`.
    #[must_use]
    pub fn parse(subject: EventSubject, final_state: &str) -> Option<Self> {
        match subject {
            EventSubject::Job(_) => JobState::parse(final_state).and_then(Self::of),
            EventSubject::Batch(_) => BatchState::parse(final_state).and_then(Self::of_batch),
        }
    }

    /// The final state a job's event reports; `None` for a batch's.
    #[must_use]
    pub fn job_state(self) -> Option<JobState> {
        match self {
            Self::Succeeded => Some(JobState::Succeeded),
            Self::Failed => Some(JobState::Failed),
            Self::Canceled => Some(JobState::Canceled),
            Self::BatchCompleted | Self::BatchExpired | Self::BatchCanceled => None,
        }
    }

    /// The final state a batch's event reports; `None` for a job's.
    #[must_use]
    pub fn batch_state(self) -> Option<BatchState> {
        match self {
            Self::BatchCompleted => Some(BatchState::Completed),
            Self::BatchExpired => Some(BatchState::Expired),
            Self::BatchCanceled => Some(BatchState::Canceled),
            Self::Succeeded | Self::Failed | Self::Canceled => None,
        }
    }
}

/// Whose end an event reports: a job's, or a batch's (whose items send none of their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventSubject {
    /// A job submitted on its own with a `webhook_url`.
    Job(JobId),
    /// A batch submitted with a `webhook_url`.
    Batch(BatchId),
}

impl EventSubject {
    /// The subject's own id, which is also its event's ([`EventId`]): job and batch ids are
    /// UUIDs made apart, so no two subjects share one.
    #[must_use]
    pub fn uuid(self) -> uuid::Uuid {
        match self {
            Self::Job(id) => id.as_uuid(),
            Self::Batch(id) => id.as_uuid(),
        }
    }

    /// The job, for a job's event.
    #[must_use]
    pub fn job_id(self) -> Option<JobId> {
        match self {
            Self::Job(id) => Some(id),
            Self::Batch(_) => None,
        }
    }

    /// The batch, for a batch's event.
    #[must_use]
    pub fn batch_id(self) -> Option<BatchId> {
        match self {
            Self::Job(_) => None,
            Self::Batch(id) => Some(id),
        }
    }
}

/// A job or a batch has one end, so one event: its id is its subject's, and so the same on
/// every attempt and redelivery (`webhook-id`) and different for every other event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(uuid::Uuid);

impl EventId {
    const PREFIX: &'static str = "msg_";

    /// The event of `subject`'s end.
    #[must_use]
    pub fn of(subject: EventSubject) -> Self {
        Self(subject.uuid())
    }

    /// The event of `job`'s end.
    #[must_use]
    pub fn of_job(job: JobId) -> Self {
        Self::of(EventSubject::Job(job))
    }

    /// Reads an id as its `Display` writes it (`msg_` and the subject's 32 hex digits); `None`
    /// for anything else.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let simple = text.strip_prefix(Self::PREFIX)?;
        uuid::Uuid::try_parse(simple).ok().map(Self)
    }

    /// The UUID a store keys the event by.
    #[must_use]
    pub fn as_uuid(self) -> uuid::Uuid {
        self.0
    }

    /// The id a store keyed the event by, read back.
    #[must_use]
    pub fn from_uuid(uuid: uuid::Uuid) -> Self {
        Self(uuid)
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", Self::PREFIX, self.0.simple())
    }
}

/// One try at delivering an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// When it started.
    pub at: OffsetDateTime,
    /// The receiver's HTTP status; `None` when there was no answer.
    pub status: Option<u16>,
    /// Why it did not deliver; `None` when it did.
    pub error: Option<String>,
}

impl Attempt {
    /// Any 2xx answer delivers.
    #[must_use]
    pub fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// An event in the outbox, as a store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEvent {
    /// The job or the batch whose end it reports; also its id ([`EventId::of`]).
    pub subject: EventSubject,
    /// The owner, whose secret signs it.
    pub user_id: UserId,
    /// What ended the job or the batch.
    pub event_type: EventType,
    /// Where it goes.
    pub url: String,
    /// When the job or the batch became final: the body's `timestamp`.
    pub occurred_at: OffsetDateTime,
    /// The body, fixed by the first attempt so that every attempt sends the same bytes.
    pub body: Option<Vec<u8>>,
    /// Every attempt, oldest first.
    pub attempts: Vec<Attempt>,
    /// When it was last delivered.
    pub delivered_at: Option<OffsetDateTime>,
    /// When it is tried next; `None` once delivered or given up.
    pub next_attempt_at: Option<OffsetDateTime>,
}

impl WebhookEvent {
    /// Whether the commit that made `job` final recorded an event: the client gave a URL.
    #[must_use]
    pub fn is_recorded_for(job: &crate::job::Job) -> bool {
        job.webhook_url().is_some() && EventType::of(job.state()).is_some()
    }

    /// The event a job's final commit records, due at once.
    #[must_use]
    pub fn of_final_job(job: &crate::job::Job, url: String, now: OffsetDateTime) -> Option<Self> {
        let event_type = EventType::of(job.state())?;
        let occurred_at = job.finished_at().unwrap_or(now);
        Some(Self::due(EventSubject::Job(job.id()), job.user_id(), event_type, url, occurred_at))
    }

    /// The event the commit that made a batch's last item final records, due at once, when the
    /// batch has a `webhook_url`; `view` is the batch after that commit.
    #[must_use]
    pub fn of_ended_batch(view: &BatchView, now: OffsetDateTime) -> Option<Self> {
        let url = view.batch.webhook_url.clone()?;
        let event_type = EventType::of_batch(view.state())?;
        let occurred_at = view.finished_at().unwrap_or(now);
        Some(Self::due(EventSubject::Batch(view.batch.id), view.batch.user_id, event_type, url, occurred_at))
    }

    fn due(
        subject: EventSubject,
        user_id: UserId,
        event_type: EventType,
        url: String,
        occurred_at: OffsetDateTime,
    ) -> Self {
        Self {
            subject,
            user_id,
            event_type,
            url,
            occurred_at,
            body: None,
            attempts: Vec::new(),
            delivered_at: None,
            next_attempt_at: Some(occurred_at),
        }
    }

    /// Its id.
    #[must_use]
    pub fn id(&self) -> EventId {
        EventId::of(self.subject)
    }
}

/// When failed deliveries are tried again: the k-th retry waits `first_delay` × 2^(k−1), give or
/// take at most [`RetryPolicy::JITTER`], each wait at most `max_delay`; an event is given up only
/// once it has had `min_attempts` attempts and `min_span` has passed since its first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The wait before the first retry.
    pub first_delay: Duration,
    /// The longest wait.
    pub max_delay: Duration,
    /// Attempts made at least.
    pub min_attempts: usize,
    /// Time from the first attempt over which attempts go on at least.
    pub min_span: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            first_delay: Duration::from_secs(5),
            max_delay: Duration::from_secs(3600),
            min_attempts: 6,
            min_span: Duration::from_secs(24 * 3600),
        }
    }
}

impl RetryPolicy {
    /// The largest share a wait is moved by, either way.
    pub const JITTER: f64 = 0.2;

    /// The wait before the `retry`-th retry (from 1) of `event`. The jitter is drawn from the
    /// event's id and the retry's number, so that receivers failing together do not see every
    /// event come back at the same instant, and a replica that takes over computes the same wait.
    #[must_use]
    pub fn delay(&self, event: EventId, retry: u32) -> Duration {
        let doubled = self.first_delay.saturating_mul(1u32 << retry.saturating_sub(1).min(31));
        let digest = Sha256::new().chain_update(event.to_string()).chain_update(retry.to_be_bytes()).finalize();
        let draw = f64::from(u16::from_be_bytes([digest[0], digest[1]])) / f64::from(u16::MAX);
        let factor = 1.0 + Self::JITTER * (2.0 * draw - 1.0);
        doubled.min(self.max_delay).mul_f64(factor).min(self.max_delay)
    }

    /// When `event` is tried next after its latest attempt failed at `now`, or `None` when it is
    /// given up. `attempts` includes that latest one.
    #[must_use]
    pub fn next_attempt(
        &self,
        event: &WebhookEvent,
        attempts: &[Attempt],
        now: OffsetDateTime,
    ) -> Option<OffsetDateTime> {
        let first = attempts.first().map_or(now, |a| a.at);
        let spanned = (now - first).unsigned_abs() >= self.min_span;
        if attempts.len() >= self.min_attempts && spanned {
            return None;
        }
        let retry = u32::try_from(attempts.len()).unwrap_or(u32::MAX);
        Some(now + self.delay(event.id(), retry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> WebhookEvent {
        WebhookEvent {
            subject: EventSubject::Job(JobId::new_at(OffsetDateTime::UNIX_EPOCH)),
            user_id: UserId::new_at(OffsetDateTime::UNIX_EPOCH),
            event_type: EventType::Succeeded,
            url: "https://example.com/hook".into(),
            occurred_at: OffsetDateTime::UNIX_EPOCH,
            body: None,
            attempts: Vec::new(),
            delivered_at: None,
            next_attempt_at: None,
        }
    }

    #[test]
    fn event_ids_read_back_and_follow_the_job() {
        let id = event().id();
        assert!(id.to_string().starts_with("msg_"));
        assert_eq!(EventId::parse(&id.to_string()), Some(id));
        assert_eq!(EventId::parse("evt_x"), None);
    }

    #[test]
    fn a_batchs_event_has_its_own_id_and_type_and_keeps_its_final_state() {
        let batch = BatchId::new_at(OffsetDateTime::UNIX_EPOCH);
        let subject = EventSubject::Batch(batch);
        assert_eq!(EventId::of(subject).to_string(), format!("msg_{}", batch.as_uuid().simple()));
        assert_ne!(EventId::of(subject), event().id());
        for event_type in [EventType::BatchCompleted, EventType::BatchExpired, EventType::BatchCanceled] {
            assert!(event_type.as_str().starts_with("batch."));
            assert_eq!(EventType::parse(subject, event_type.final_state()), Some(event_type));
        }
        for event_type in [EventType::Succeeded, EventType::Failed, EventType::Canceled] {
            assert_eq!(EventType::parse(event().subject, event_type.final_state()), Some(event_type));
        }
        assert_eq!(EventType::parse(subject, "succeeded"), None, "no batch succeeds");
    }

    #[test]
    fn waits_double_within_the_jitter_and_stop_at_the_cap() {
        let policy = RetryPolicy::default();
        let id = event().id();
        for retry in 1..=20 {
            let nominal = (5.0 * 2f64.powi(retry as i32 - 1)).min(3600.0);
            let delay = policy.delay(id, retry).as_secs_f64();
            assert!(delay >= nominal * 0.8 - 1e-6 && delay <= (nominal * 1.2).min(3600.0) + 1e-6, "{retry}: {delay}");
        }
    }

    #[test]
    fn attempts_go_on_for_six_tries_and_a_day() {
        let policy = RetryPolicy::default();
        let start = OffsetDateTime::UNIX_EPOCH;
        let (mut now, mut attempts) = (start, Vec::new());
        loop {
            attempts.push(Attempt { at: now, status: Some(500), error: Some("HTTP 500".into()) });
            match policy.next_attempt(&event(), &attempts, now) {
                Some(next) => now = next,
                None => break,
            }
        }
        assert!(attempts.len() >= 6);
        assert!(now - start >= time::Duration::hours(24), "{}", now - start);
    }
}
