//! The removals port over Postgres: table `removed_jobs`, one row per removed job, which a page
//! of kept jobs leaves out with an anti-join on its primary key while it walks `jobs_user_id_id`.

use async_trait::async_trait;
use diesel::dsl::{exists, not};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::ids::{JobId, UserId};
use genjobs_domain::job::Job;
use genjobs_domain::ports::{JobRemovals, KeptPage, PageOrder, StoreError};
use time::OffsetDateTime;

use super::PgStore;
use crate::rows::JobRow;
use crate::schema::{jobs, removed_jobs};

#[async_trait]
impl JobRemovals for PgStore {
    async fn remove(&self, id: JobId, now: OffsetDateTime) -> Result<bool, StoreError> {
        let inserted = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                async move {
                    diesel::sql_query(
                        "INSERT INTO removed_jobs (job_id, removed_at) SELECT id, $2 FROM jobs WHERE id = $1
                         ON CONFLICT (job_id) DO NOTHING",
                    )
                    .bind::<diesel::sql_types::Uuid, _>(id.as_uuid())
                    .bind::<diesel::sql_types::Timestamptz, _>(now)
                    .execute(conn)
                    .await
                }
                .boxed()
            })
            .await?;
        Ok(inserted > 0)
    }

    async fn is_removed(&self, id: JobId) -> Result<bool, StoreError> {
        self.repeatable(|conn: &mut AsyncPgConnection| {
            async move {
                diesel::select(exists(removed_jobs::table.filter(removed_jobs::job_id.eq(id.as_uuid()))))
                    .get_result(conn)
                    .await
            }
            .boxed()
        })
        .await
    }

    async fn kept_jobs(&self, user_id: UserId, page: KeptPage) -> Result<Vec<Job>, StoreError> {
        let rows = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                async move {
                    let removed = removed_jobs::table.filter(removed_jobs::job_id.eq(jobs::id));
                    let mut query = jobs::table
                        .filter(jobs::user_id.eq(user_id.as_uuid()))
                        .filter(jobs::modality.eq(page.modality.as_str()))
                        .filter(not(exists(removed)))
                        .select(JobRow::as_select())
                        .limit(i64::try_from(page.limit).unwrap_or(i64::MAX))
                        .into_boxed();
                    query = match (page.order, page.after) {
                        (PageOrder::Descending, after) => {
                            let query = query.order(jobs::id.desc());
                            match after {
                                Some(after) => query.filter(jobs::id.lt(after.as_uuid())),
                                None => query,
                            }
                        }
                        (PageOrder::Ascending, after) => {
                            let query = query.order(jobs::id.asc());
                            match after {
                                Some(after) => query.filter(jobs::id.gt(after.as_uuid())),
                                None => query,
                            }
                        }
                    };
                    query.load(conn).await
                }
                .boxed()
            })
            .await?;
        rows.into_iter().map(JobRow::into_job).collect()
    }
}
