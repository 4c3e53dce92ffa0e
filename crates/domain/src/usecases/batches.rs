//! Batches: many generations accepted as one unit at the batch price (`submit_batch`, beside the
//! single submissions it shares its checks with), then read, paged, canceled, and closed when
//! their completion window passes ([`Batches`]).
//!
//! Canceling and closing a window commit each item's own transition, as a job's cancel does, so
//! that each item's credits move once however the batch ends; a replica that dies halfway leaves
//! the rest to the steps, which end an item of a canceled or expired batch instead of sending it.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::{StreamExt, stream};
use time::OffsetDateTime;

use super::{Caller, Cancellations, Ports, Submission, Submissions, SubmitError};
use crate::batch::{Batch, BatchEnd, BatchView, MAX_WOKEN_AT_ONCE, check_custom_ids, check_metadata};
use crate::ids::{BatchId, JobId};
use crate::invalid::InvalidRequest;
use crate::job::{BatchPlace, Job, JobError, JobErrorCode, JobState, Trigger};
use crate::ports::{
    AcceptError, BatchAccepted, BatchFilter, BatchStore, Clock, Commit, IdempotencyClaim, JobEvents, JobStore,
    StoreError,
};

/// Most items a page of a batch's items or results holds.
pub const MAX_BATCH_ITEMS_PAGE: usize = 1_000;
/// Most batches a page of a listing holds.
pub const MAX_BATCHES_PAGE: usize = 100;
/// How many items a cancel or a closing window ends at once.
const ENDING_CONCURRENCY: usize = 16;
/// How many items a cancel or a closing window reads at a time.
const ENDING_PAGE: usize = 500;

/// One item of a batch as submitted: the client's name for it and its generation, validated.
#[derive(Debug, Clone)]
pub struct BatchItemRequest {
    /// The client's name for the item, unique in the batch.
    pub custom_id: String,
    /// The generation, validated as a single submission would be (without an idempotency key).
    pub submission: Submission,
}

/// A validated batch.
#[derive(Debug, Clone)]
pub struct BatchSubmission {
    /// Its id, when the caller chose it (an OpenAI batch's items are the native batch of its
    /// own id); a new one when `None`.
    pub id: Option<BatchId>,
    /// Most items it may have: [`crate::batch::MAX_BATCH_ITEMS`], or
    /// [`crate::openai_batch::MAX_BATCH_FILE_LINES`] for an OpenAI batch.
    pub max_items: usize,
    /// Its items, in order.
    pub items: Vec<BatchItemRequest>,
    /// Seconds from acceptance until items not yet sent expire.
    pub completion_window_secs: u64,
    /// Where its end is posted, when the client asked.
    pub webhook_url: Option<String>,
    /// The client's labels.
    pub metadata: BTreeMap<String, String>,
    /// The idempotency key and a fingerprint of the request as the client sent it.
    pub idempotency: Option<(super::IdempotencyKey, String)>,
}

impl BatchSubmission {
    /// Checks what concerns the batch as a whole: the items' count and `custom_id`s, the
    /// metadata.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `items`, `items[i].custom_id` or `metadata`.
    pub fn check(&self) -> Result<(), InvalidRequest> {
        check_custom_ids(self.items.iter().map(|item| item.custom_id.as_str()), self.max_items)?;
        check_metadata(&self.metadata)
    }
}

impl Submissions {
    /// Accepts a batch, all or nothing: every item is priced at the batch price (the operator's
    /// batch percent, the caller's tier on top) and checked as its own submission would be,
    /// then the sum is held in one step; each item becomes a job of the batch.
    ///
    /// # Errors
    /// See [`SubmitError`]; an item's refusal names its `param` under `items[i].body.`.
    pub async fn submit_batch(&self, caller: &Caller, submission: BatchSubmission) -> Result<BatchView, SubmitError> {
        let settings = self.batch;
        submission.check()?;
        if let Some(url) = &submission.webhook_url {
            self.check_webhook_destination(url).await?;
        }
        let catalog = self.catalog.current();
        let now = self.ports.clock.now();
        let batch_id = submission.id.unwrap_or_else(|| BatchId::new_at(now));
        let window = time::Duration::seconds(i64::try_from(submission.completion_window_secs).unwrap_or(i64::MAX));
        let expires_at = now + window;
        let mut jobs = Vec::with_capacity(submission.items.len());
        for (index, item) in submission.items.into_iter().enumerate() {
            let Submission { request, received, .. } = item.submission;
            let under_item = |e: SubmitError| match e {
                SubmitError::Invalid(invalid) => SubmitError::Invalid(invalid.under(&format!("items[{index}].body"))),
                other => other,
            };
            if !caller.may_use(&request.model) {
                return Err(SubmitError::ModelNotAllowed { model: request.model.clone() });
            }
            let rate = self
                .price(&catalog, &request)
                .map_err(under_item)?
                .rate(&request.input)
                .at(caller.price_percent)
                .in_batch(settings.price_percent);
            let place = BatchPlace { batch_id, custom_id: item.custom_id, admitted: false };
            jobs.push(self.new_job(caller, &request, rate, received, now).with_batch(place, expires_at));
        }
        let batch = Batch {
            id: batch_id,
            user_id: caller.user_id,
            key_prefix: caller.key.as_ref().map(|key| key.prefix.clone()),
            created_at: now,
            expires_at,
            webhook_url: submission.webhook_url,
            metadata: submission.metadata,
            ended: None,
        };
        let claim = submission.idempotency.map(|(key, fingerprint)| IdempotencyClaim { key: key.0, fingerprint });
        let items = jobs.len();
        match self.ports.batches.accept_batch(batch, jobs, claim, now).await {
            Ok(BatchAccepted::Created(view)) => {
                tracing::info!(batch_id = %view.batch.id, user_id = %caller.user_id, items, credits_held = %view.figures.credits_held, "batch accepted");
                // The first items start at once when their owner has room; should this wake be
                // lost, the batch windows' next look wakes them.
                if let Err(e) = self.ports.batches.wake_admissible(now, MAX_WOKEN_AT_ONCE).await {
                    tracing::warn!(batch_id = %view.batch.id, error = %e, "could not wake the new batch's first items; the next look will");
                }
                Ok(view)
            }
            Ok(BatchAccepted::Replayed(view)) => {
                tracing::info!(batch_id = %view.batch.id, "idempotent retry answered with the original batch");
                Ok(view)
            }
            Err(AcceptError::InsufficientCredits { needed, available }) => {
                Err(SubmitError::InsufficientCredits { needed, available })
            }
            Err(AcceptError::KeyBudgetExceeded(exceeded)) => Err(SubmitError::KeyBudgetExceeded(exceeded)),
            Err(AcceptError::IdempotencyConflict) => Err(SubmitError::IdempotencyConflict),
            Err(AcceptError::ConcurrencyLimit { .. } | AcceptError::KeyConcurrencyLimit { .. }) => {
                Err(StoreError::Internal("a batch's acceptance is never refused for the concurrent-job limit".into())
                    .into())
            }
            Err(AcceptError::UnknownUser) => {
                Err(StoreError::Internal("an authenticated user has no account".into()).into())
            }
            Err(AcceptError::Store(e)) => Err(e.into()),
        }
    }
}

/// Why a batch could not be read or canceled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchQueryError {
    /// 404: no such batch, or not one the caller's key may see.
    #[error("no such batch")]
    NotFound,
    /// 403: another user's batch.
    #[error("this batch belongs to another user")]
    Forbidden,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A page of a listing and the cursor of the next, `None` when nothing follows.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchPage<T, C> {
    /// The page.
    pub data: Vec<T>,
    /// What to pass back for the next page.
    pub next: Option<C>,
}

/// Reading, canceling and closing batches.
#[derive(Clone)]
pub struct Batches {
    batches: Arc<dyn BatchStore>,
    jobs: Arc<dyn JobStore>,
    events: Arc<dyn JobEvents>,
    clock: Arc<dyn Clock>,
    cancellations: Cancellations,
}

impl Batches {
    /// Batches over `ports`, their sent items canceled as `cancellations` cancels a job.
    #[must_use]
    pub fn new(ports: &Ports, cancellations: Cancellations) -> Self {
        Self {
            batches: Arc::clone(&ports.batches),
            jobs: Arc::clone(&ports.jobs),
            events: Arc::clone(&ports.events),
            clock: Arc::clone(&ports.clock),
            cancellations,
        }
    }

    /// The caller's batch `id` with its figures.
    ///
    /// # Errors
    /// See [`BatchQueryError`].
    pub async fn batch(&self, caller: &Caller, id: BatchId) -> Result<BatchView, BatchQueryError> {
        let view = self.batches.batch(id).await?.ok_or(BatchQueryError::NotFound)?;
        owned(caller, &view.batch)?;
        Ok(view)
    }

    /// Any user's batch `id`, for operators.
    ///
    /// # Errors
    /// [`BatchQueryError::NotFound`]; when the store fails.
    pub async fn batch_for_operator(&self, id: BatchId) -> Result<BatchView, BatchQueryError> {
        self.batches.batch(id).await?.ok_or(BatchQueryError::NotFound)
    }

    /// The batches `filter` selects, newest first, `limit` (1 to [`MAX_BATCHES_PAGE`]) at a time
    /// from `before`; the cursor of the next page when one follows.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn list(
        &self,
        filter: BatchFilter,
        before: Option<BatchId>,
        limit: usize,
    ) -> Result<BatchPage<BatchView, BatchId>, StoreError> {
        let limit = limit.clamp(1, MAX_BATCHES_PAGE);
        let mut data = self.batches.find_batches(filter, before, limit + 1).await?;
        let next = (data.len() > limit).then(|| {
            data.truncate(limit);
            data.last().map(|view| view.batch.id)
        });
        Ok(BatchPage { data, next: next.flatten() })
    }

    /// The caller's batch's items in its order (only those in `state` when given), `limit` at a
    /// time after the item `after`.
    ///
    /// # Errors
    /// See [`BatchQueryError`].
    pub async fn items(
        &self,
        caller: &Caller,
        id: BatchId,
        state: Option<JobState>,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<BatchPage<Job, JobId>, BatchQueryError> {
        self.owned_batch(caller, id).await?;
        self.page(id, state, false, after, limit).await
    }

    /// Any user's batch's items, for operators, as [`Batches::items`] pages them.
    ///
    /// # Errors
    /// [`BatchQueryError::NotFound`]; when the store fails.
    pub async fn items_for_operator(
        &self,
        id: BatchId,
        state: Option<JobState>,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<BatchPage<Job, JobId>, BatchQueryError> {
        self.batches.batch_record(id).await?.ok_or(BatchQueryError::NotFound)?;
        self.page(id, state, false, after, limit).await
    }

    /// The caller's batch's final items in its order, `limit` at a time after the item `after`:
    /// what its results are made of, read page by page so that a reader's memory does not grow
    /// with the batch.
    ///
    /// # Errors
    /// See [`BatchQueryError`].
    pub async fn results(
        &self,
        caller: &Caller,
        id: BatchId,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<BatchPage<Job, JobId>, BatchQueryError> {
        self.owned_batch(caller, id).await?;
        self.page(id, None, true, after, limit).await
    }

    async fn page(
        &self,
        id: BatchId,
        state: Option<JobState>,
        final_only: bool,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<BatchPage<Job, JobId>, BatchQueryError> {
        let limit = limit.clamp(1, MAX_BATCH_ITEMS_PAGE);
        let mut data = self.batches.batch_items(id, state, final_only, after, limit + 1).await?;
        let next = (data.len() > limit).then(|| {
            data.truncate(limit);
            data.last().map(Job::id)
        });
        Ok(BatchPage { data, next: next.flatten() })
    }

    async fn owned_batch(&self, caller: &Caller, id: BatchId) -> Result<Batch, BatchQueryError> {
        let batch = self.batches.batch_record(id).await?.ok_or(BatchQueryError::NotFound)?;
        owned(caller, &batch)?;
        Ok(batch)
    }

    /// Cancels the caller's batch: no item of it is sent from now on; items not yet sent are
    /// canceled and released now, sent ones canceled as a job's cancel does. The batch after.
    ///
    /// # Errors
    /// See [`BatchQueryError`].
    pub async fn cancel(&self, caller: &Caller, id: BatchId) -> Result<BatchView, BatchQueryError> {
        self.owned_batch(caller, id).await?;
        self.cancel_batch(id).await
    }

    /// Cancels any user's batch, as its owner's cancel would: an operator's.
    ///
    /// # Errors
    /// [`BatchQueryError::NotFound`]; when the store fails.
    pub async fn cancel_for_operator(&self, id: BatchId) -> Result<BatchView, BatchQueryError> {
        tracing::info!(batch_id = %id, "an operator cancels the batch");
        self.cancel_batch(id).await
    }

    async fn cancel_batch(&self, id: BatchId) -> Result<BatchView, BatchQueryError> {
        let now = self.clock.now();
        self.batches.end_batch(id, BatchEnd::Canceled, now).await?.ok_or(BatchQueryError::NotFound)?;
        tracing::info!(batch_id = %id, "batch canceled; its items are being canceled");
        let ended = self.end_items(
            id,
            |_| true,
            |cancellations, job| async move { cancellations.cancel_batch_item(job.id()).await.is_ok() },
        );
        let canceled = ended.await?;
        tracing::info!(batch_id = %id, canceled, "batch's items canceled");
        self.batches.batch(id).await?.ok_or(BatchQueryError::NotFound)
    }

    /// Wakes the items waiting for admission that their owners have room for now, as a job's end
    /// does on the replica that saw it: the look that catches a wake lost to a crash, and a new
    /// batch's first items should their own wake fail. How many it woke.
    ///
    /// # Errors
    /// When the store fails; nothing was woken.
    pub async fn wake_waiting(&self) -> Result<usize, StoreError> {
        Ok(self.batches.wake_admissible(self.clock.now(), MAX_WOKEN_AT_ONCE).await?.len())
    }

    /// Closes the windows that passed: each such batch ends `expired`, and its items waiting to
    /// be sent fail `BATCH_EXPIRED` and are released (items already sent run on). How many
    /// batches were closed; a driver calls this every second or so.
    ///
    /// # Errors
    /// When the store fails; what was closed stays closed.
    pub async fn close_windows(&self) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let due = self.batches.batches_past_window(now, MAX_BATCHES_PAGE).await?;
        for &id in &due {
            self.batches.end_batch(id, BatchEnd::Expired, now).await?;
            let jobs = Arc::clone(&self.jobs);
            let events = Arc::clone(&self.events);
            let clock = Arc::clone(&self.clock);
            let expired = self
                .end_items(id, Job::awaits_admission, move |_, job| {
                    let (jobs, events, clock) = (Arc::clone(&jobs), Arc::clone(&events), Arc::clone(&clock));
                    async move { expire(jobs.as_ref(), events.as_ref(), clock.as_ref(), job).await }
                })
                .await?;
            tracing::info!(batch_id = %id, expired, "batch's window closed; items not sent expired");
        }
        Ok(due.len())
    }

    /// Ends, with `end`, the items of batch `id` not final that `which` selects, a few at once;
    /// how many it ended.
    async fn end_items<F, Fut>(&self, id: BatchId, which: impl Fn(&Job) -> bool, end: F) -> Result<usize, StoreError>
    where
        F: Fn(Cancellations, Job) -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut after = None;
        let mut ended = 0;
        loop {
            let page = self.batches.batch_items(id, None, false, after, ENDING_PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id());
            let full = page.len() == ENDING_PAGE;
            let chosen = page.into_iter().filter(|job| !job.state().is_final() && which(job));
            ended += stream::iter(chosen)
                .map(|job| end(self.cancellations.clone(), job))
                .buffer_unordered(ENDING_CONCURRENCY)
                .filter(|done| std::future::ready(*done))
                .count()
                .await;
            if !full {
                break;
            }
        }
        Ok(ended)
    }
}

/// Fails an item that was never sent with `BATCH_EXPIRED`, releasing its hold; `false` when it
/// changed meanwhile (sent, or ended otherwise), which the item's own step then settles.
pub(super) async fn expire(jobs: &dyn JobStore, events: &dyn JobEvents, clock: &dyn Clock, job: Job) -> bool {
    let Ok(transition) = job.apply(expired_trigger(), clock.now()) else { return false };
    match jobs.commit(transition).await {
        Ok(Commit::Applied(job)) => {
            tracing::info!(job_id = %job.id(), credits_released = %job.credits_held(), "batch item expired");
            events.publish(job.id()).await;
            super::job_ended(events, &job).await;
            true
        }
        Ok(Commit::Stale(_) | Commit::Missing | Commit::OwnerAtLimit(_)) => false,
        Err(e) => {
            tracing::warn!(job_id = %job.id(), error = %e, "could not expire the batch item; its step will");
            false
        }
    }
}

fn owned(caller: &Caller, batch: &Batch) -> Result<(), BatchQueryError> {
    if batch.user_id != caller.user_id {
        return Err(BatchQueryError::Forbidden);
    }
    if !caller.sees_key(batch.key_prefix.as_ref()) {
        return Err(BatchQueryError::NotFound);
    }
    Ok(())
}

/// When the batch a job belongs to no longer lets it be sent: how the item ends instead.
pub(super) fn ending_for(batch: &Batch, now: OffsetDateTime) -> Option<Trigger> {
    match batch.ended {
        Some((BatchEnd::Canceled, _)) => Some(Trigger::Cancel),
        Some((BatchEnd::Expired, _)) => Some(expired_trigger()),
        None if now >= batch.expires_at => Some(expired_trigger()),
        None => None,
    }
}

fn expired_trigger() -> Trigger {
    Trigger::failed(JobError::new(
        JobErrorCode::BatchExpired,
        "the batch's completion window closed before the item was sent",
    ))
}
