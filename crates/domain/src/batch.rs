//! Batches: many generations submitted as one unit, run on capacity no interactive job needs, at
//! the batch price.
//!
//! A batch is a record of its own ([`Batch`]: owner, window, metadata, whether it was canceled
//! or expired) and a set of ordinary jobs, its items, each knowing its place
//! ([`crate::job::BatchPlace`]).
//! What a batch shows beyond its record (its counts, credits, start and end) is summed from its
//! items when read ([`BatchFigures`]), never kept twice, so that no crash leaves a count wrong.
//!
//! An item is held, charged and released as any job. It runs at `low` priority, and it counts
//! against its owner's concurrent-job limit only once admitted to be sent: an item not yet
//! admitted counts nowhere, and is admitted only while its owner is under the limit (the store
//! checks and counts in the same step as the item's [`crate::job::Trigger::Admitted`]), so that
//! a batch of thousands waits for room instead of being refused.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::catalog::PricePercent;
use crate::credits::Credits;
use crate::ids::{BatchId, KeyPrefix, UserId};
use crate::invalid::InvalidRequest;
use crate::job::JobState;

/// Most items in one batch.
pub const MAX_BATCH_ITEMS: usize = 5_000;
/// Longest `custom_id`, in characters.
pub const MAX_CUSTOM_ID_CHARS: usize = 64;
/// Shortest completion window, in seconds.
pub const MIN_COMPLETION_WINDOW_SECS: u64 = 60;
/// Longest completion window, in seconds (a week).
pub const MAX_COMPLETION_WINDOW_SECS: u64 = 604_800;
/// The completion window of a batch that names none (a day).
pub const DEFAULT_COMPLETION_WINDOW_SECS: u64 = 86_400;
/// Most metadata pairs.
pub const MAX_METADATA_PAIRS: usize = 16;
/// Most waiting items one wake names: more than any owner's room frees at once in practice; the
/// rest are woken by the next look.
pub const MAX_WOKEN_AT_ONCE: usize = 1_000;
/// The batch price of an operator who sets none, in percent of the model's price.
pub const DEFAULT_BATCH_PRICE_PERCENT: u32 = 50;

/// How a batch was ended before every item finished on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEnd {
    /// Its owner (or an operator) canceled it.
    Canceled,
    /// Its completion window passed.
    Expired,
}

/// A batch as kept: what was fixed when it was accepted, and how it was ended, if it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Its id.
    pub id: BatchId,
    /// Its owner.
    pub user_id: UserId,
    /// The key it was submitted with.
    pub key_prefix: Option<KeyPrefix>,
    /// Acceptance time.
    pub created_at: OffsetDateTime,
    /// When its completion window closes: items not sent by then fail `BATCH_EXPIRED`.
    pub expires_at: OffsetDateTime,
    /// Where its end is posted, when the client asked.
    pub webhook_url: Option<String>,
    /// The client's labels.
    pub metadata: BTreeMap<String, String>,
    /// How and when it was ended early, if it was.
    pub ended: Option<(BatchEnd, OffsetDateTime)>,
}

/// What a batch looks like from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchState {
    /// Some item is not final, or the batch was never ended and has items to run.
    InProgress,
    /// Every item is final, the batch not ended early.
    Completed,
    /// Its window passed; every item is final.
    Expired,
    /// It was canceled; every item is final.
    Canceled,
}

impl BatchState {
    /// The name the API uses.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::InProgress => "in_progress",
            BatchState::Completed => "completed",
            BatchState::Expired => "expired",
            BatchState::Canceled => "canceled",
        }
    }

    /// Parses [`BatchState::as_str`].
    #[must_use]
    pub fn parse(text: &str) -> Option<BatchState> {
        [BatchState::InProgress, BatchState::Completed, BatchState::Expired, BatchState::Canceled]
            .into_iter()
            .find(|state| state.as_str() == text)
    }

    /// Whether the batch changes no more.
    #[must_use]
    pub fn is_final(self) -> bool {
        self != BatchState::InProgress
    }
}

/// How many of a batch's items are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// Every item.
    pub total: u64,
    /// Items not yet running (waiting to be sent, or queued at the provider).
    pub queued: u64,
    /// Items running.
    pub running: u64,
    /// Items succeeded.
    pub succeeded: u64,
    /// Items failed (expired ones included).
    pub failed: u64,
    /// Items canceled.
    pub canceled: u64,
}

impl BatchCounts {
    /// One more item in `state`.
    pub fn count(&mut self, state: JobState) {
        self.total += 1;
        match state {
            JobState::Queued => self.queued += 1,
            JobState::Running => self.running += 1,
            JobState::Succeeded => self.succeeded += 1,
            JobState::Failed => self.failed += 1,
            JobState::Canceled => self.canceled += 1,
        }
    }

    /// Whether every item is final.
    #[must_use]
    pub fn all_final(&self) -> bool {
        self.queued == 0 && self.running == 0
    }
}

/// What a batch's items add up to, summed by the store when the batch is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchFigures {
    /// Items by state.
    pub counts: BatchCounts,
    /// What the items held at acceptance, summed.
    pub credits_held: Credits,
    /// What the succeeded items were charged, summed.
    pub credits_spent: Credits,
    /// When the first item was sent to its provider.
    pub started_at: Option<OffsetDateTime>,
    /// When the last item became final.
    pub last_finished_at: Option<OffsetDateTime>,
}

/// A batch and what its items add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchView {
    /// The batch as kept.
    pub batch: Batch,
    /// Its items' figures.
    pub figures: BatchFigures,
}

impl BatchView {
    /// Its state: in progress while any item is not final, else how it ended: as it was ended,
    /// or `expired` when its window closed while an item was not final (an item's own step may
    /// expire it before the window's closing ends the batch), else `completed`.
    #[must_use]
    pub fn state(&self) -> BatchState {
        if !self.figures.counts.all_final() {
            return BatchState::InProgress;
        }
        match self.batch.ended {
            Some((BatchEnd::Canceled, _)) => BatchState::Canceled,
            Some((BatchEnd::Expired, _)) => BatchState::Expired,
            None if self.figures.last_finished_at.is_some_and(|last| last >= self.batch.expires_at) => {
                BatchState::Expired
            }
            None => BatchState::Completed,
        }
    }

    /// When it became final: when its last item did (or when it was ended, for a batch whose
    /// items were all final before).
    #[must_use]
    pub fn finished_at(&self) -> Option<OffsetDateTime> {
        if !self.state().is_final() {
            return None;
        }
        let ended = self.batch.ended.map(|(_, at)| at);
        match (self.figures.last_finished_at, ended) {
            (Some(last), Some(ended)) => Some(last.max(ended)),
            (last, ended) => last.or(ended).or(Some(self.batch.created_at)),
        }
    }
}

/// What the operator charges for batch items, in percent of the model's price (the owner's tier
/// applies on top).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// `GENJOBS_BATCH_PRICE_PERCENT`.
    pub price_percent: PricePercent,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self { price_percent: PricePercent::new(u64::from(DEFAULT_BATCH_PRICE_PERCENT)).unwrap_or(PricePercent::FULL) }
    }
}

/// Checks a completion window; `None` is the default.
///
/// # Errors
/// [`InvalidRequest`] naming `completion_window_secs` outside 60 to 604,800.
pub fn completion_window(secs: Option<u64>) -> Result<u64, InvalidRequest> {
    let secs = secs.unwrap_or(DEFAULT_COMPLETION_WINDOW_SECS);
    if (MIN_COMPLETION_WINDOW_SECS..=MAX_COMPLETION_WINDOW_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(InvalidRequest::param(
            "completion_window_secs",
            format!(
                "`completion_window_secs` must be from {MIN_COMPLETION_WINDOW_SECS} to {MAX_COMPLETION_WINDOW_SECS}"
            ),
        ))
    }
}

/// Checks a batch's metadata.
///
/// # Errors
/// [`InvalidRequest`] naming `metadata` with more than 16 pairs.
pub fn check_metadata(metadata: &BTreeMap<String, String>) -> Result<(), InvalidRequest> {
    if metadata.len() > MAX_METADATA_PAIRS {
        return Err(InvalidRequest::param("metadata", format!("`metadata` has at most {MAX_METADATA_PAIRS} pairs")));
    }
    Ok(())
}

/// Checks the items' count and their `custom_id`s, in order: 1 to `max_items` items
/// ([`MAX_BATCH_ITEMS`] for a native batch), each `custom_id` 1 to 64 characters and unique in
/// the batch.
///
/// # Errors
/// [`InvalidRequest`] naming `items` for a wrong count, `items[i].custom_id` for the first
/// wrong or repeated id.
pub fn check_custom_ids<'a>(
    ids: impl ExactSizeIterator<Item = &'a str>,
    max_items: usize,
) -> Result<(), InvalidRequest> {
    if ids.len() == 0 || ids.len() > max_items {
        return Err(InvalidRequest::param("items", format!("a batch has 1 to {max_items} items")));
    }
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    for (index, id) in ids.enumerate() {
        let param = format!("items[{index}].custom_id");
        let chars = id.chars().count();
        if chars == 0 || chars > MAX_CUSTOM_ID_CHARS {
            return Err(InvalidRequest::param(
                &param,
                format!("`custom_id` must be 1 to {MAX_CUSTOM_ID_CHARS} characters"),
            ));
        }
        if !seen.insert(id) {
            return Err(InvalidRequest::param(&param, format!("`custom_id` {id:?} is used twice in this batch")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(counts: BatchCounts, ended: Option<(BatchEnd, OffsetDateTime)>) -> BatchView {
        let now = OffsetDateTime::UNIX_EPOCH;
        let batch = Batch {
            id: BatchId::new_at(now),
            user_id: UserId::new_at(now),
            key_prefix: None,
            created_at: now,
            expires_at: now,
            webhook_url: None,
            metadata: BTreeMap::new(),
            ended,
        };
        BatchView { batch, figures: BatchFigures { counts, ..BatchFigures::default() } }
    }

    #[test]
    fn a_batch_stays_in_progress_until_every_item_is_final_however_it_ended() {
        let running = BatchCounts { total: 2, running: 1, canceled: 1, ..BatchCounts::default() };
        let at = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(view(running, Some((BatchEnd::Canceled, at))).state(), BatchState::InProgress);
        let done = BatchCounts { total: 2, succeeded: 1, canceled: 1, ..BatchCounts::default() };
        assert_eq!(view(done, Some((BatchEnd::Canceled, at))).state(), BatchState::Canceled);
        assert_eq!(view(done, Some((BatchEnd::Expired, at))).state(), BatchState::Expired);
        assert_eq!(view(done, None).state(), BatchState::Completed);
        let mut late = view(done, None);
        late.batch.expires_at = at + time::Duration::hours(1);
        late.figures.last_finished_at = Some(late.batch.expires_at);
        assert_eq!(late.state(), BatchState::Expired, "its window closed before its last item ended");
        late.figures.last_finished_at = Some(at);
        assert_eq!(late.state(), BatchState::Completed);
    }

    #[test]
    fn custom_ids_are_named_by_their_item() {
        let repeated = check_custom_ids(["a", "b", "a"].into_iter(), MAX_BATCH_ITEMS).unwrap_err();
        assert_eq!(repeated.param.as_deref(), Some("items[2].custom_id"));
        let long = "x".repeat(65);
        let too_long = check_custom_ids(["a", long.as_str()].into_iter(), MAX_BATCH_ITEMS).unwrap_err();
        assert_eq!(too_long.param.as_deref(), Some("items[1].custom_id"));
        assert_eq!(
            check_custom_ids(std::iter::empty::<&str>(), MAX_BATCH_ITEMS).unwrap_err().param.as_deref(),
            Some("items")
        );
        assert!(check_custom_ids(["a", "b"].into_iter(), MAX_BATCH_ITEMS).is_ok());
    }

    #[test]
    fn windows_outside_a_minute_to_a_week_are_refused() {
        assert_eq!(completion_window(None).unwrap(), 86_400);
        assert!(completion_window(Some(59)).is_err());
        assert!(completion_window(Some(604_801)).is_err());
        assert_eq!(completion_window(Some(60)).unwrap(), 60);
    }
}
