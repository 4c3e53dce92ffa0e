//! The removals port: the ids of removed jobs, kept in the store's one lock next to the jobs
//! they mark, so that a page of kept jobs is read in one step.

use async_trait::async_trait;
use genjobs_domain::ids::{JobId, UserId};
use genjobs_domain::job::Job;
use genjobs_domain::ports::{JobRemovals, KeptPage, PageOrder, StoreError};
use time::OffsetDateTime;

use crate::MemoryStore;

#[async_trait]
impl JobRemovals for MemoryStore {
    async fn remove(&self, id: JobId, _: OffsetDateTime) -> Result<bool, StoreError> {
        let mut state = self.state();
        Ok(state.jobs.contains_key(&id) && state.removed.insert(id))
    }

    async fn is_removed(&self, id: JobId) -> Result<bool, StoreError> {
        Ok(self.state().removed.contains(&id))
    }

    async fn kept_jobs(&self, user_id: UserId, page: KeptPage) -> Result<Vec<Job>, StoreError> {
        let state = self.state();
        let Some(ids) = state.jobs_by_user.get(&user_id) else {
            return Ok(Vec::new());
        };
        let ids: Box<dyn Iterator<Item = &JobId>> = match (page.order, page.after) {
            (PageOrder::Descending, Some(after)) => Box::new(ids.range(..after).rev()),
            (PageOrder::Descending, None) => Box::new(ids.iter().rev()),
            (PageOrder::Ascending, Some(after)) => {
                Box::new(ids.range((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded)))
            }
            (PageOrder::Ascending, None) => Box::new(ids.iter()),
        };
        Ok(ids
            .filter(|id| !state.removed.contains(id))
            .filter_map(|id| state.jobs.get(id).map(|row| &row.job))
            .filter(|job| job.modality() == page.modality)
            .take(page.limit)
            .cloned()
            .collect())
    }
}
