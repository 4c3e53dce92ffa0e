//! Batches: each batch's record beside the jobs, and its items' ids in the batch's order (the
//! order of their ids). A batch's figures are summed from its items when read.
//!
//! Each batch also counts its items not yet final, counted down by each item's final commit: the
//! one that reaches none ends the batch, and records the batch's webhook event in the same step
//! ([`State::batch_item_finished`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use async_trait::async_trait;
use genjobs_domain::batch::{Batch, BatchEnd, BatchFigures, BatchView};
use genjobs_domain::client_webhooks::WebhookEvent;
use genjobs_domain::credits::{BalanceError, CreditMovement, Credits};
use genjobs_domain::ids::{BatchId, JobId, UserId};
use genjobs_domain::job::{Job, JobState};
use genjobs_domain::ports::{
    AcceptError, BatchAccepted, BatchFilter, BatchStore, IDEMPOTENCY_RETENTION, IdempotencyClaim, LedgerMovement,
    StoreError,
};
use time::OffsetDateTime;

use crate::{IdempotencyRecord, JobRow, MemoryStore, State, inconsistent};

/// The batches and their items.
#[derive(Debug, Default)]
pub(crate) struct Batches {
    records: BTreeMap<BatchId, Batch>,
    items: HashMap<BatchId, BTreeSet<JobId>>,
    /// Each batch's items not yet final.
    unfinished: HashMap<BatchId, usize>,
}

impl Batches {
    /// Whether the batch still has an item to finish: a batch without one has ended.
    fn is_open(&self, id: BatchId) -> bool {
        self.unfinished.get(&id).is_some_and(|left| *left > 0)
    }
}

impl State {
    fn batch_view(&self, batch: &Batch) -> BatchView {
        let mut figures = BatchFigures::default();
        let items = self.batches.items.get(&batch.id).into_iter().flatten();
        for job in items.filter_map(|id| self.jobs.get(id)).map(|row| &row.job) {
            figures.counts.count(job.state());
            figures.credits_held = Credits::new(figures.credits_held.get() + job.credits_held().get());
            if let Some(actual) = job.credits_actual() {
                figures.credits_spent = Credits::new(figures.credits_spent.get() + actual.get());
            }
            if let Some(sent) = job.sent_at() {
                figures.started_at = Some(figures.started_at.map_or(sent, |first| first.min(sent)));
            }
            if let Some(finished) = job.finished_at().or(job.canceled_at()) {
                figures.last_finished_at = Some(figures.last_finished_at.map_or(finished, |last| last.max(finished)));
            }
        }
        BatchView { batch: batch.clone(), figures }
    }

    fn items_of(&self, id: BatchId) -> impl Iterator<Item = &Job> {
        let items = self.batches.items.get(&id).into_iter().flatten();
        items.filter_map(|id| self.jobs.get(id)).map(|row| &row.job)
    }

    /// Makes the item `id` due at `now` and claimable when it rests (due later): a resting item
    /// is held by no driver, even when the lease of the driver that parked it still names it.
    fn wake(&mut self, id: JobId, now: OffsetDateTime) {
        let Some(row) = self.jobs.get_mut(&id) else { return };
        let Some(due) = row.job.next_poll_at().filter(|due| *due > now) else { return };
        // A driver's claim since an earlier wake leaves the item due by that wake's time, later
        // than an older `now`: under a lease, only an item parked until its window's end rests.
        let window_end =
            row.job.batch().and_then(|place| self.batches.records.get(&place.batch_id)).map(|b| b.expires_at);
        if row.lease.is_some() && window_end.is_none_or(|end| due < end) {
            return;
        }
        let mut stored = row.job.to_stored();
        stored.next_poll_at = Some(now);
        let Ok(woken) = Job::restore(stored) else { return };
        row.job = woken;
        if let Some(lease) = row.lease.take() {
            self.leases.take_out(lease, id);
        }
        self.due.remove(&(due, id));
        self.due.insert((now, id));
    }

    /// Counts down the unfinished items of `batch_id`, whose item has just become final (and is
    /// kept so); the last one ends the batch and records its webhook event, when it has a URL.
    pub(crate) fn batch_item_finished(&mut self, batch_id: BatchId, now: OffsetDateTime) {
        let Some(left) = self.batches.unfinished.get_mut(&batch_id) else { return };
        *left = left.saturating_sub(1);
        if *left > 0 {
            return;
        }
        let Some(batch) = self.batches.records.get(&batch_id) else { return };
        if let Some(event) = WebhookEvent::of_ended_batch(&self.batch_view(batch), now) {
            self.outbox.record(event);
        }
    }

    /// The batch whose first item is `first`, for an idempotent retry.
    fn batch_of_item(&self, first: JobId) -> Option<BatchView> {
        let place = self.jobs.get(&first)?.job.batch()?.batch_id;
        self.batches.records.get(&place).map(|batch| self.batch_view(batch))
    }
}

#[async_trait]
impl BatchStore for MemoryStore {
    async fn accept_batch(
        &self,
        batch: Batch,
        items: Vec<Job>,
        idempotency: Option<IdempotencyClaim>,
        now: OffsetDateTime,
    ) -> Result<BatchAccepted, AcceptError> {
        let mut state = self.state();
        state.prune_idempotency(now);
        if let Some(claim) = &idempotency {
            let slot = (batch.user_id, claim.key.clone());
            if let Some(record) = state.idempotency.get(&slot).filter(|r| now - r.created_at < IDEMPOTENCY_RETENTION) {
                if record.fingerprint != claim.fingerprint {
                    return Err(AcceptError::IdempotencyConflict);
                }
                return state
                    .batch_of_item(record.job_id)
                    .map(BatchAccepted::Replayed)
                    .ok_or(AcceptError::IdempotencyConflict);
            }
        }
        let held = items.iter().map(|job| job.credits_held().get()).fold(0u64, u64::saturating_add);
        let held = Credits::new(held);
        let user = state.users.get(&batch.user_id).ok_or(AcceptError::UnknownUser)?;
        let balances = match user.balances.apply(CreditMovement::Hold(held)) {
            Ok(balances) => balances,
            Err(BalanceError::Insufficient { needed, available }) => {
                return Err(AcceptError::InsufficientCredits { needed, available });
            }
            Err(e) => return Err(inconsistent(e).into()),
        };
        state.check_key_budget_for(batch.key_prefix.as_ref(), held, now)?;
        let user = state.users.get_mut(&batch.user_id).ok_or(AcceptError::UnknownUser)?;
        user.balances = balances;
        if let (Some(claim), Some(first)) = (idempotency, items.first()) {
            state.idempotency.insert(
                (batch.user_id, claim.key),
                IdempotencyRecord { fingerprint: claim.fingerprint, job_id: first.id(), created_at: now },
            );
        }
        let ids: BTreeSet<JobId> = items.iter().map(Job::id).collect();
        for job in items {
            state.jobs_by_user.entry(job.user_id()).or_default().insert(job.id());
            state.index(&job);
            state.record(job.user_id(), Some(job.id()), LedgerMovement::Hold(job.credits_held()));
            state.jobs.insert(job.id(), JobRow { job, lease: None });
        }
        state.batches.unfinished.insert(batch.id, ids.len());
        state.batches.items.insert(batch.id, ids);
        let view = state.batch_view(&batch);
        state.batches.records.insert(batch.id, batch);
        Ok(BatchAccepted::Created(view))
    }

    async fn batch_record(&self, id: BatchId) -> Result<Option<Batch>, StoreError> {
        Ok(self.state().batches.records.get(&id).cloned())
    }

    async fn batch(&self, id: BatchId) -> Result<Option<BatchView>, StoreError> {
        let state = self.state();
        Ok(state.batches.records.get(&id).map(|batch| state.batch_view(batch)))
    }

    /// A scan of every batch: the embedded store holds no more than one process keeps.
    async fn find_batches(
        &self,
        filter: BatchFilter,
        before: Option<BatchId>,
        limit: usize,
    ) -> Result<Vec<BatchView>, StoreError> {
        let state = self.state();
        let older = match before {
            Some(before) => state.batches.records.range(..before),
            None => state.batches.records.range(..),
        };
        Ok(older
            .rev()
            .filter(|(_, batch)| filter.user_id.is_none_or(|user_id| batch.user_id == user_id))
            .map(|(_, batch)| state.batch_view(batch))
            .filter(|view| filter.matches(view))
            .take(limit)
            .collect())
    }

    async fn batch_items(
        &self,
        id: BatchId,
        state_wanted: Option<JobState>,
        final_only: bool,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        let state = self.state();
        let Some(items) = state.batches.items.get(&id) else { return Ok(Vec::new()) };
        let following = match after {
            Some(after) => items.range((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded)),
            None => items.range(..),
        };
        Ok(following
            .filter_map(|id| state.jobs.get(id).map(|row| &row.job))
            .filter(|job| state_wanted.is_none_or(|wanted| job.state() == wanted))
            .filter(|job| !final_only || job.state().is_final())
            .take(limit)
            .cloned()
            .collect())
    }

    async fn end_batch(&self, id: BatchId, end: BatchEnd, at: OffsetDateTime) -> Result<Option<Batch>, StoreError> {
        let mut state = self.state();
        let open = state.batches.is_open(id);
        let Some(batch) = state.batches.records.get_mut(&id) else { return Ok(None) };
        if open {
            batch.ended.get_or_insert((end, at));
        }
        Ok(Some(batch.clone()))
    }

    async fn batches_past_window(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<BatchId>, StoreError> {
        let state = self.state();
        Ok(state
            .batches
            .records
            .values()
            .filter(|batch| batch.ended.is_none() && batch.expires_at <= now && state.batches.is_open(batch.id))
            .map(|batch| batch.id)
            .take(limit)
            .collect())
    }

    async fn wake_admissible(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<JobId>, StoreError> {
        let mut state = self.state();
        let mut room: HashMap<UserId, u32> = HashMap::new();
        let mut next = Vec::new();
        for batch in state.batches.records.values() {
            let Some(user) = state.users.get(&batch.user_id) else { continue };
            // An ended batch's unsent items are woken to be ended, never admitted: no room needed.
            let mut unlimited = u32::MAX;
            let left = match batch.ended {
                Some(_) => &mut unlimited,
                None => room
                    .entry(batch.user_id)
                    .or_insert_with(|| user.limits.max_concurrent_jobs.saturating_sub(user.active_jobs)),
            };
            for job in state.items_of(batch.id).filter(|job| job.awaits_admission()) {
                if *left == 0 || next.len() == limit {
                    break;
                }
                *left -= 1;
                next.push(job.id());
            }
        }
        for id in &next {
            state.wake(*id, now);
        }
        Ok(next)
    }
}
