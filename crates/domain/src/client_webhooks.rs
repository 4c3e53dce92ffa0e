//! Webhooks to clients: a job submitted with a `webhook_url` has one event recorded in the
//! outbox by the same store commit that makes it final ([`crate::ports::JobStore::commit`]); the
//! [`crate::usecases::WebhookDeliveries`] use case delivers it, retrying on the [`RetryPolicy`].
//! This module holds the rules: the event's id and type, what an attempt records, the retry
//! schedule. What the URL itself must look like is checked with the request, in
//! [`crate::request::check_webhook_url`]; the host it names, in [`crate::address::destination_host`].

use std::time::Duration;

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::ids::{JobId, UserId};
use crate::job::JobState;

/// What ended a job, as a webhook's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `job.succeeded`.
    Succeeded,
    /// `job.failed`.
    Failed,
    /// `job.canceled`.
    Canceled,
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

    /// The `type` of the event's body.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "job.succeeded",
            Self::Failed => "job.failed",
            Self::Canceled => "job.canceled",
        }
    }

    /// The final state the event reports.
    #[must_use]
    pub fn state(self) -> JobState {
        match self {
            Self::Succeeded => JobState::Succeeded,
            Self::Failed => JobState::Failed,
            Self::Canceled => JobState::Canceled,
        }
    }
}

/// A job has one end, so one event: its id is the job's, and so the same on every attempt and
/// redelivery (`webhook-id`) and different for every other event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId(JobId);

impl EventId {
    const PREFIX: &'static str = "msg_";

    /// The event of `job`'s end.
    #[must_use]
    pub fn of_job(job: JobId) -> Self {
        Self(job)
    }

    /// Reads an id as its `Display` writes it (`msg_` and the job id's 32 hex digits); `None` for
    /// anything else.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let simple = text.strip_prefix(Self::PREFIX)?;
        uuid::Uuid::try_parse(simple).ok().map(|uuid| Self(JobId::from_uuid(uuid)))
    }

    /// The job whose end it reports.
    #[must_use]
    pub fn job_id(self) -> JobId {
        self.0
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", Self::PREFIX, self.0.as_uuid().simple())
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
    /// The job whose end it reports; also its id ([`EventId::of_job`]).
    pub job_id: JobId,
    /// The job's owner, whose secret signs it.
    pub user_id: UserId,
    /// What ended the job.
    pub event_type: EventType,
    /// Where it goes.
    pub url: String,
    /// When the job became final: the body's `timestamp`.
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
        Some(Self {
            job_id: job.id(),
            user_id: job.user_id(),
            event_type,
            url,
            occurred_at,
            body: None,
            attempts: Vec::new(),
            delivered_at: None,
            next_attempt_at: Some(occurred_at),
        })
    }

    /// Its id.
    #[must_use]
    pub fn id(&self) -> EventId {
        EventId::of_job(self.job_id)
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
            job_id: JobId::new_at(OffsetDateTime::UNIX_EPOCH),
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
