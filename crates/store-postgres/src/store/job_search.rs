//! The operators' search of every user's jobs: one statement, newest first, each condition of the
//! filter a clause that an index of its own answers in the order of ids (`jobs_user_id_id`,
//! `jobs_state_id`, `jobs_model_id`, `jobs_provider_id`, `jobs_key_prefix_id`; the primary key
//! without one), so that
//! a first page reads a page of index entries however many jobs the table holds.

use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::ids::JobId;
use genjobs_domain::job::Job;
use genjobs_domain::ports::{JobFilter, StoreError};

use super::PgStore;
use crate::rows::JobRow;
use crate::schema::jobs;

impl PgStore {
    /// [`genjobs_domain::ports::JobStore::find_jobs`]: see there.
    pub(super) async fn search_jobs(
        &self,
        filter: &JobFilter,
        before: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        let rows = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let mut query = jobs::table
                    .select(JobRow::as_select())
                    .order(jobs::id.desc())
                    .limit(i64::try_from(limit).unwrap_or(i64::MAX))
                    .into_boxed();
                if let Some(user_id) = filter.user_id {
                    query = query.filter(jobs::user_id.eq(user_id.as_uuid()));
                }
                if let Some(state) = filter.state {
                    query = query.filter(jobs::state.eq(state.as_str()));
                }
                if let Some(model) = &filter.model {
                    query = query.filter(jobs::model.eq(model.as_str().to_owned()));
                }
                if let Some(provider) = &filter.upstream {
                    // The expression of the index `jobs_provider_id`, spelled as it is there.
                    let at_provider =
                        sql::<Bool>("(jobs.upstream ->> 'provider') = ").bind::<Text, _>(provider.clone());
                    query = query.filter(at_provider);
                }
                if let Some(keys) = &filter.keys {
                    let keys: Vec<String> = keys.iter().map(|key| key.as_str().to_owned()).collect();
                    query = query.filter(jobs::key_prefix.eq_any(keys));
                }
                if let Some(key) = &filter.key {
                    query = query.filter(jobs::key_prefix.eq(key.as_str().to_owned()));
                }
                if let Some(before) = before {
                    query = query.filter(jobs::id.lt(before.as_uuid()));
                }
                async move { query.load(conn).await }.boxed()
            })
            .await?;
        rows.into_iter().map(JobRow::into_job).collect()
    }
}
