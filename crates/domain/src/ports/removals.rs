//! The removals port: jobs their owner removed from a listing (OpenAI's `videos.delete`). A
//! removed job is neither listed nor read there again, while the job itself, its credits and its
//! ledger stay as they were: the native API still shows it, and usage still counts it.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::StoreError;
use crate::ids::{JobId, UserId};
use crate::job::Job;
use crate::modality::Modality;

/// Which way a page of kept jobs runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PageOrder {
    /// Oldest first.
    Ascending,
    /// Newest first (the default).
    #[default]
    Descending,
}

/// A page of a user's kept jobs of one modality: those after `after` in `order`, at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptPage {
    /// Only jobs of this modality.
    pub modality: Modality,
    /// The page starts after this job, in `order`; from the first job when `None`.
    pub after: Option<JobId>,
    /// Which way the page runs.
    pub order: PageOrder,
    /// At most this many jobs.
    pub limit: usize,
}

/// Jobs their owner removed, and pages of the jobs kept.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] when the store cannot be reached, and
/// [`StoreError::Internal`] for anything else unexpected.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait JobRemovals: Send + Sync {
    /// Marks job `id` removed at `now`; whether it was kept until then (`false` for a job
    /// removed before, or one the store does not have).
    async fn remove(&self, id: JobId, now: OffsetDateTime) -> Result<bool, StoreError>;

    /// Whether job `id` was removed.
    async fn is_removed(&self, id: JobId) -> Result<bool, StoreError>;

    /// The user's jobs of `page.modality` that were not removed, in `page.order` of their ids
    /// (the order they were accepted in), after `page.after`, at most `page.limit`.
    async fn kept_jobs(&self, user_id: UserId, page: KeptPage) -> Result<Vec<Job>, StoreError>;
}
