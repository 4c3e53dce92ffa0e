//! [`BatchStore`]: batches and their items, accepted whole in one atomic step.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::batch::{Batch, BatchEnd, BatchState, BatchView};
use crate::ids::{BatchId, JobId, UserId};
use crate::job::{Job, JobState};
use crate::ports::{AcceptError, IdempotencyClaim, StoreError};

/// A batch accepted now, or the batch an earlier request with the same idempotency key made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchAccepted {
    /// A new batch; its items' credits are held.
    Created(BatchView),
    /// The batch of an earlier request with the same key and body; nothing was held.
    Replayed(BatchView),
}

/// Which batches a listing shows: every condition given must hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchFilter {
    /// Only this user's batches.
    pub user_id: Option<UserId>,
    /// Only batches in this state.
    pub state: Option<BatchState>,
}

impl BatchFilter {
    /// Whether `view` meets every condition: the rule each store's search follows.
    #[must_use]
    pub fn matches(&self, view: &BatchView) -> bool {
        self.user_id.is_none_or(|user_id| view.batch.user_id == user_id)
            && self.state.is_none_or(|state| view.state() == state)
    }
}

/// Batches and their items. An item is a job like any other ([`crate::ports::JobStore`] reads,
/// commits and claims it); this port adds what concerns the batch as a whole.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] (inside [`AcceptError::Store`] for
/// [`BatchStore::accept_batch`]) when the backing store cannot be reached, and
/// [`StoreError::Internal`] for anything else unexpected.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait BatchStore: Send + Sync {
    /// Accepts a batch and its items in one atomic step, all or nothing: replays an idempotent
    /// retry (the batch the first request made, nothing held), checks the owner's credits against
    /// the sum of the items' holds, then the budget of the batch's key and of every ancestor that
    /// has one against that sum (as [`crate::ports::JobStore::accept`] checks one job's hold),
    /// holds each item's credits with a ledger hold of its own, inserts the batch and its items
    /// and records the idempotency claim. Items are not counted as active jobs: each counts from
    /// its [`crate::job::Trigger::Admitted`] on. The items are in the batch's order; a store
    /// lists them in the order of their ids, which is that order.
    ///
    /// # Errors
    /// [`AcceptError::InsufficientCredits`] (with the sum as `needed`),
    /// [`AcceptError::KeyBudgetExceeded`], [`AcceptError::IdempotencyConflict`],
    /// [`AcceptError::UnknownUser`]; nothing is held or inserted on any of them.
    async fn accept_batch(
        &self,
        batch: Batch,
        items: Vec<Job>,
        idempotency: Option<IdempotencyClaim>,
        now: OffsetDateTime,
    ) -> Result<BatchAccepted, AcceptError>;

    /// The batch as kept, without its figures (a cheap read); `None` when there is none.
    async fn batch_record(&self, id: BatchId) -> Result<Option<Batch>, StoreError>;

    /// The batch and what its items add up to, or `None`.
    async fn batch(&self, id: BatchId) -> Result<Option<BatchView>, StoreError>;

    /// The batches `filter` [matches](BatchFilter::matches), newest first, older than `before`
    /// when given, at most `limit`.
    async fn find_batches(
        &self,
        filter: BatchFilter,
        before: Option<BatchId>,
        limit: usize,
    ) -> Result<Vec<BatchView>, StoreError>;

    /// A batch's items in its order, after the item `after` when given, only those in `state`
    /// when given (any final state when `final_only`), at most `limit`.
    async fn batch_items(
        &self,
        id: BatchId,
        state: Option<JobState>,
        final_only: bool,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError>;

    /// Ends the batch as `end` says at `at`, unless it has ended already: ended before (the first
    /// end stays), or completed (every item final: its end, and its webhook event, were recorded
    /// by its last item's final commit). The batch as kept after, or `None` when there is none.
    ///
    /// A batch's items not yet final are counted down by their final commits, in the same step
    /// as each, so that exactly one commit (the last item's) finds none left: that commit records
    /// the batch's webhook event ([`crate::client_webhooks::WebhookEvent::of_ended_batch`]), as the
    /// batch then reads, when the batch has a `webhook_url`.
    async fn end_batch(&self, id: BatchId, end: BatchEnd, at: OffsetDateTime) -> Result<Option<Batch>, StoreError>;

    /// Batches not ended, with an item not yet final, whose completion window closed at `now`,
    /// oldest first, at most `limit`.
    async fn batches_past_window(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<BatchId>, StoreError>;

    /// Wakes the items waiting for admission whose owners have room under their concurrent-job
    /// limit now: each owner's first waiting items in its batches' order (those a driver holds
    /// included), at most as many per owner as that owner has room for, and the unsent items of
    /// the batches ended early whatever the room (their step ends them, should the cancel or the
    /// window's close that ended the batch have been cut short), at most `limit` in all; each resting one (due later than `now`) is made due at
    /// `now` and claimable by any driver (a resting item is held by none, even when the lease of
    /// the driver that parked it still names it), and their ids returned. Waiting items rest until their window closes
    /// ([`crate::job::Job::with_batch`]), so this is how they start: a driver wakes them when a
    /// job ends and now and then, never every waiting item; each is still admitted by its own
    /// commit, so a wake is only advice.
    async fn wake_admissible(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<JobId>, StoreError>;
}
