//! The outbox of client webhooks and the users' sealed secrets, in the store's one lock: a job's
//! final commit records its event in the same step ([`Outbox::record_final`]), and so does the
//! final commit of a batch's last item for the batch's ([`Outbox::record`], called by `batches`).

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use genjobs_domain::address::destination_host;
use genjobs_domain::client_webhooks::{Attempt, EventId, WebhookEvent};
use genjobs_domain::ids::{JobId, UserId};
use genjobs_domain::job::Job;
use genjobs_domain::ports::{ClaimLimits, OutboxState, StoreError, WebhookStore};
use time::OffsetDateTime;

use super::MemoryStore;

/// Events by id, indexed by when each is tried next and by when the pending ones occurred.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    events: HashMap<EventId, Row>,
    due: BTreeSet<(OffsetDateTime, EventId)>,
    pending: BTreeSet<(OffsetDateTime, EventId)>,
    secrets: HashMap<UserId, Vec<u8>>,
}

#[derive(Debug, Clone)]
struct Row {
    event: WebhookEvent,
    lease_until: Option<OffsetDateTime>,
}

impl Row {
    fn claimable_at(&self) -> Option<OffsetDateTime> {
        self.event.next_attempt_at.map(|next| self.lease_until.map_or(next, |lease| lease.max(next)))
    }
}

impl Outbox {
    /// Records the event of `job`, which has just become final, when its client asked for one.
    pub(crate) fn record_final(&mut self, job: &Job, now: OffsetDateTime) {
        let Some(event) = job.webhook_url().and_then(|url| WebhookEvent::of_final_job(job, url.to_owned(), now)) else {
            return;
        };
        self.record(event);
    }

    /// Records a new event, due as it says.
    pub(crate) fn record(&mut self, event: WebhookEvent) {
        self.store(Row { event, lease_until: None });
    }

    fn store(&mut self, row: Row) {
        let id = row.event.id();
        if let Some(old) = self.events.remove(&id)
            && let Some(next) = old.event.next_attempt_at
        {
            self.due.remove(&(next, id));
            self.pending.remove(&(old.event.occurred_at, id));
        }
        if let Some(next) = row.event.next_attempt_at {
            self.due.insert((next, id));
            self.pending.insert((row.event.occurred_at, id));
        }
        self.events.insert(id, row);
    }

    /// Whether `job_id` has an event still to deliver: retention keeps such a job.
    pub(crate) fn is_pending(&self, job_id: JobId) -> bool {
        self.events.get(&EventId::of_job(job_id)).is_some_and(|row| row.event.next_attempt_at.is_some())
    }

    /// Drops the (delivered or abandoned) event of a job retention removes.
    pub(crate) fn forget(&mut self, job_id: JobId) {
        self.events.remove(&EventId::of_job(job_id));
    }

    fn update(&mut self, id: EventId, change: impl FnOnce(&mut Row)) -> bool {
        let Some(mut row) = self.events.get(&id).cloned() else { return false };
        change(&mut row);
        self.store(row);
        true
    }
}

#[async_trait]
impl WebhookStore for MemoryStore {
    async fn claim_due_events(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limits: ClaimLimits,
    ) -> Result<Vec<WebhookEvent>, StoreError> {
        let mut state = self.state();
        let outbox = &mut state.outbox;
        let mut taken: HashMap<String, usize> = HashMap::new();
        let claimable: Vec<EventId> = outbox
            .due
            .iter()
            .take_while(|(next, _)| *next <= now)
            .filter_map(|(_, id)| outbox.events.get(id))
            .filter(|row| row.lease_until.is_none_or(|l| l <= now))
            .filter(|row| {
                let host = destination_host(&row.event.url);
                let free = limits.free_for(&host);
                let count = taken.entry(host).or_default();
                let fits = *count < free;
                *count += usize::from(fits);
                fits
            })
            .map(|row| row.event.id())
            .take(limits.total)
            .collect();
        Ok(claimable
            .into_iter()
            .filter_map(|id| {
                let row = outbox.events.get_mut(&id)?;
                row.lease_until = Some(lease_until);
                Some(row.event.clone())
            })
            .collect())
    }

    async fn defer_events(&self, events: Vec<EventId>, until: OffsetDateTime) -> Result<(), StoreError> {
        let mut state = self.state();
        for id in events {
            state.outbox.update(id, |row| row.lease_until = Some(until));
        }
        Ok(())
    }

    async fn fix_event_body(&self, event: EventId, body: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        let mut state = self.state();
        let row = state.outbox.events.get_mut(&event).ok_or_else(|| StoreError::Internal("no such event".into()))?;
        Ok(row.event.body.get_or_insert(body).clone())
    }

    async fn record_attempt(
        &self,
        event: EventId,
        attempt: Attempt,
        next_attempt_at: Option<OffsetDateTime>,
    ) -> Result<(), StoreError> {
        self.state().outbox.update(event, |row| {
            if attempt.delivered() {
                row.event.delivered_at = Some(attempt.at);
            }
            row.event.attempts.push(attempt);
            row.event.next_attempt_at = next_attempt_at;
            row.lease_until = None;
        });
        Ok(())
    }

    async fn webhook_events(&self, event: EventId) -> Result<Vec<WebhookEvent>, StoreError> {
        Ok(self.state().outbox.events.get(&event).map(|row| row.event.clone()).into_iter().collect())
    }

    async fn redeliver(&self, event: EventId, now: OffsetDateTime) -> Result<bool, StoreError> {
        Ok(self.state().outbox.update(event, |row| row.event.next_attempt_at = Some(now)))
    }

    async fn outbox_state(&self) -> Result<OutboxState, StoreError> {
        let state = self.state();
        let outbox = &state.outbox;
        let mut next_claimable_at: Option<OffsetDateTime> = None;
        // Entries are in order of next attempt: the first one not leased beyond that bounds
        // every later one.
        for (next, id) in &outbox.due {
            if next_claimable_at.is_some_and(|best| best <= *next) {
                break;
            }
            let at = outbox.events.get(id).and_then(Row::claimable_at).unwrap_or(*next);
            next_claimable_at = Some(next_claimable_at.map_or(at, |best| best.min(at)));
        }
        let oldest_pending_since = outbox.pending.first().map(|(at, _)| *at);
        Ok(OutboxState { next_claimable_at, oldest_pending_since })
    }

    async fn webhook_secret(&self, user_id: UserId) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.state().outbox.secrets.get(&user_id).cloned())
    }

    async fn keep_webhook_secret(
        &self,
        user_id: UserId,
        sealed: Vec<u8>,
        replace: bool,
    ) -> Result<Vec<u8>, StoreError> {
        let mut state = self.state();
        let secrets = &mut state.outbox.secrets;
        if replace {
            secrets.insert(user_id, sealed.clone());
            return Ok(sealed);
        }
        Ok(secrets.entry(user_id).or_insert(sealed).clone())
    }
}
