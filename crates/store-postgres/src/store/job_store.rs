//! The job port over Postgres: reads through the job cache, compare-and-set commits, and the
//! driver's claims; accepting is in `accept`.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::ids::{JobId, LeaseId, UserId};
use genjobs_domain::job::{Job, JobState, Transition};
use genjobs_domain::ports::{
    AcceptError, Accepted, Commit, IdempotencyClaim, JobFilter, JobStore, StoreError, UnfinishedJobs,
};
use time::OffsetDateTime;

use super::PgStore;
use super::admission::Admission;
use crate::error::from_diesel;
use crate::pool::{Durability, count_job_commit};
use crate::rows::{JobRow, Settle, UpdateMany};
use crate::schema::jobs;

#[derive(QueryableByName)]
struct Version {
    #[diesel(sql_type = diesel::sql_types::Text)]
    version: String,
}

#[async_trait]
impl JobStore for PgStore {
    async fn accept(
        &self,
        job: Job,
        idempotency: Option<IdempotencyClaim>,
        lease: Option<LeaseId>,
        now: OffsetDateTime,
    ) -> Result<Accepted, AcceptError> {
        self.accept_job(job, idempotency, lease, now).await
    }

    async fn job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        if let Some(job) = self.jobs_cache.get(&id) {
            return Ok(Some(job));
        }
        // Boxed on its own: a database read's future is kilobytes, which every call, the cached
        // ones included, would otherwise copy into the box `async_trait` makes of this one.
        Box::pin(self.read_job(id)).await
    }

    async fn job_by_upstream_key(&self, key: &str) -> Result<Option<Job>, StoreError> {
        let key = key.to_owned();
        let row = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let key = key.clone();
                async move {
                    jobs::table
                        .filter(jobs::upstream_key.eq(key))
                        .select(JobRow::as_select())
                        .first(conn)
                        .await
                        .optional()
                }
                .boxed()
            })
            .await?;
        row.map(JobRow::into_job).transpose()
    }

    async fn jobs_of(&self, user_id: UserId, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError> {
        let rows = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                async move {
                    let mut query = jobs::table
                        .filter(jobs::user_id.eq(user_id.as_uuid()))
                        .select(JobRow::as_select())
                        .order(jobs::id.desc())
                        .limit(i64::try_from(limit).unwrap_or(i64::MAX))
                        .into_boxed();
                    if let Some(before) = before {
                        query = query.filter(jobs::id.lt(before.as_uuid()));
                    }
                    query.load(conn).await
                }
                .boxed()
            })
            .await?;
        rows.into_iter().map(JobRow::into_job).collect()
    }

    async fn find_jobs(&self, filter: &JobFilter, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError> {
        self.search_jobs(filter, before, limit).await
    }

    async fn commit(&self, transition: Transition) -> Result<Commit, StoreError> {
        let row = JobRow::from_job(transition.job())?;
        let expected_version = transition.expected_version();
        let expected = i64::try_from(expected_version).unwrap_or(i64::MAX);
        let (frees_slot, frees_batch_slot) = (transition.frees_slot(), transition.frees_batch_slot());
        let takes_slot = transition.takes_slot();
        let announced_by_caller = transition.changes_state();
        let reading = self.jobs_cache.reading(transition.job().id());
        let movement = transition.movement().map(Self::movement_columns).transpose()?;
        // A change that moves no credits joins a group commit (one statement for every change
        // waiting on the same flush); a recomputable one goes through connections that do not
        // wait for the disk. One that moves credits is a statement of its own, and a batch
        // item's admission, counted in its owner's jobs, a transaction of its own.
        let mut owner_at_limit = false;
        let applied = match movement {
            None if takes_slot => match self.admit(&row, expected).await? {
                Admission::Admitted => true,
                Admission::OwnerAtLimit => {
                    owner_at_limit = true;
                    false
                }
                Admission::Stale => false,
            },
            None if transition.is_recomputable() => {
                self.relaxed_group.commit(&self.relaxed, self.relaxed_durability, row, expected).await?
            }
            None => self.durable_group.commit(&self.db, Durability::Durable, row, expected).await?,
            Some((kind, amount, released, held, spent)) => {
                let settle = Settle {
                    update: UpdateMany::of(&[(&row, expected)]),
                    user_id: row.user_id,
                    kind,
                    amount,
                    released,
                    held,
                    spent,
                    finished: i32::from(frees_slot),
                    batch_finished: i32::from(frees_batch_slot),
                };
                let applied: Vec<uuid::Uuid> = self.in_session(async |conn| settle.load(conn).await).await?;
                count_job_commit(Durability::Durable);
                !applied.is_empty()
            }
        };
        let job = transition.into_job();
        if applied {
            reading.keep(&job);
            if !announced_by_caller {
                // The use cases announce new states; any other change (progress, a withdrawn
                // submission) is announced here, so that other replicas' caches drop it.
                self.announce_row(job.id()).await;
            }
            return Ok(Commit::Applied(job));
        }
        let current = self.in_session(async |conn| Self::job_row(conn, job.id()).await).await?;
        Ok(match current.map(JobRow::into_job).transpose()? {
            Some(current) => {
                reading.keep(&current);
                // Read after the admission's transaction: another driver may have changed it since.
                if owner_at_limit && current.version() == expected_version {
                    Commit::OwnerAtLimit(current)
                } else {
                    Commit::Stale(current)
                }
            }
            None => Commit::Missing,
        })
    }

    async fn ready(&self) -> Result<(), StoreError> {
        let applied: Vec<String> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                async move {
                    diesel::sql_query("SELECT version FROM __diesel_schema_migrations").load::<Version>(conn).await
                }
                .map(|rows| rows.map(|rows| rows.into_iter().map(|r| r.version).collect()))
                .boxed()
            })
            .await?;
        match crate::pool::pending_migrations(&applied) {
            0 => Ok(()),
            pending => Err(StoreError::Unavailable(format!("{pending} database migrations are not applied"))),
        }
    }

    async fn claim_due(&self, lease: LeaseId, now: OffsetDateTime, limit: usize) -> Result<Vec<Job>, StoreError> {
        let claim = diesel::sql_query(CLAIM_DUE)
            .bind::<diesel::sql_types::Uuid, _>(lease.as_uuid())
            .bind::<Timestamptz, _>(now)
            .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX));
        let rows: Vec<JobRow> = self.in_session(async |conn| claim.load(conn).await).await?;
        if !rows.is_empty() {
            count_job_commit(Durability::Durable);
        }
        rows.into_iter().map(JobRow::into_job).collect()
    }

    async fn start_lease(&self, lease: LeaseId, _now: OffsetDateTime, until: OffsetDateTime) -> Result<(), StoreError> {
        let start = diesel::sql_query(START_LEASE)
            .bind::<diesel::sql_types::Uuid, _>(lease.as_uuid())
            .bind::<Timestamptz, _>(until);
        self.in_session(async |conn| start.execute(conn).await).await?;
        count_job_commit(Durability::Durable);
        Ok(())
    }

    async fn renew_lease(
        &self,
        lease: LeaseId,
        held: Vec<JobId>,
        settled_before: OffsetDateTime,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<Option<Vec<JobId>>, StoreError> {
        self.within(async {
        let held: Vec<uuid::Uuid> = held.iter().map(JobId::as_uuid).collect();
        let renew = diesel::sql_query(RENEW_LEASE)
            .bind::<diesel::sql_types::Uuid, _>(lease.as_uuid())
            .bind::<Timestamptz, _>(until)
            .bind::<Timestamptz, _>(now)
            .bind::<Array<diesel::sql_types::Uuid>, _>(held)
            .bind::<Timestamptz, _>(settled_before);
        // A lost renewal only lets other drivers take the jobs over early, so it need not wait
        // for the disk.
        let mut session = self.relaxed_session().await?;
        let renewal: Renewal = renew.get_result(&mut *session).await.map_err(from_diesel)?;
        session.finish().await?;
        count_job_commit(self.relaxed_durability);
        if renewal.freed > 0 {
            tracing::info!(%lease, jobs = renewal.freed, "jobs under the lease that its driver let go of are free again");
        }
        Ok(renewal.lives.then(|| renewal.not_covered.into_iter().map(JobId::from_uuid).collect()))
        })
        .await
    }

    async fn end_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        let end = diesel::sql_query(END_LEASE).bind::<diesel::sql_types::Uuid, _>(lease.as_uuid());
        self.in_session(async |conn| end.execute(conn).await).await?;
        count_job_commit(Durability::Durable);
        Ok(())
    }

    async fn count_unfinished(&self) -> Result<UnfinishedJobs, StoreError> {
        let counts: Vec<(String, i64)> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                // Only open jobs have a next poll time, so the partial index `jobs_due` bounds
                // the scan to them however many final jobs the table keeps.
                jobs::table
                    .filter(jobs::next_poll_at.is_not_null())
                    .group_by(jobs::state)
                    .select((jobs::state, diesel::dsl::count_star()))
                    .load(conn)
                    .boxed()
            })
            .await?;
        let count = |state: JobState| {
            counts.iter().find(|(s, _)| s == state.as_str()).map_or(0, |(_, n)| u64::try_from(*n).unwrap_or(0))
        };
        Ok(UnfinishedJobs { queued: count(JobState::Queued), running: count(JobState::Running) })
    }
}

impl PgStore {
    /// Job `id` as the database has it, kept in the cache unless a change may have been missed
    /// meanwhile.
    async fn read_job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        let reading = self.jobs_cache.reading(id);
        let row = self.repeatable(|conn: &mut AsyncPgConnection| Self::job_row(conn, id)).await?;
        let job = row.map(JobRow::into_job).transpose()?;
        if let Some(job) = &job {
            reading.keep(job);
        }
        Ok(job)
    }
}

/// Puts under the lease `$1`, if it lives, due jobs under no lease that lives: those under no
/// lease, found through `jobs_unleased_due`, and those of leases that ran out (the jobs of a
/// replica that died). Jobs under a live lease are never read: walking the driver's own held
/// jobs (all due, as far as the table knows) on every tick was the claim's whole cost. Only
/// while a lease lies dead does the claim walk the due jobs for its ones (the uncorrelated
/// `EXISTS` gates that scan off otherwise), and a dead lease with no open job left is forgotten.
/// The candidates are chosen first, into an array, and the rows locked are then found by their
/// ids alone: as an `IN` join, or ordered again by `next_poll_at`, the planner (whose statistics
/// of `next_poll_at` age as time passes, or are not there yet on a young table) read the whole
/// table, or every due job of the live leases, on every claim. `SKIP LOCKED` lets replicas claim
/// side by side.
const CLAIM_DUE: &str = "
WITH dead AS (
    SELECT id FROM job_leases WHERE lives_until <= $2
), forgotten AS (
    DELETE FROM job_leases USING dead
    WHERE job_leases.id = dead.id
      AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.lease_id = dead.id AND jobs.next_poll_at IS NOT NULL)
)
UPDATE jobs SET lease_id = $1
WHERE id IN (
    SELECT id FROM jobs
    WHERE id = ANY (ARRAY(
        SELECT id FROM (
            (SELECT id, next_poll_at FROM jobs WHERE lease_id IS NULL AND next_poll_at <= $2
             ORDER BY next_poll_at LIMIT $3)
            UNION ALL
            (SELECT id, next_poll_at FROM jobs
             WHERE EXISTS (SELECT 1 FROM dead) AND next_poll_at <= $2 AND lease_id IN (SELECT id FROM dead)
             ORDER BY next_poll_at LIMIT $3)
        ) AS candidates
        ORDER BY next_poll_at LIMIT $3
    ))
      AND next_poll_at <= $2
      AND (lease_id IS NULL OR lease_id IN (SELECT id FROM dead))
      AND EXISTS (SELECT 1 FROM job_leases WHERE id = $1 AND lives_until > $2)
    FOR UPDATE SKIP LOCKED
)
RETURNING *";

/// Extends the lease `$1` to `$2` if it lives at `$3`; frees the open jobs under it that its
/// driver does not hold (`$4`) and that were accepted before `$5`, locking them in the order of
/// their ids as group commits lock theirs; answers whether it lives and which held jobs it does
/// not cover (final or taken).
const RENEW_LEASE: &str = "
WITH lease AS (
    UPDATE job_leases SET lives_until = $2 WHERE id = $1 AND lives_until > $3 RETURNING id
), strays AS (
    UPDATE jobs SET lease_id = NULL
    WHERE id IN (
        SELECT id FROM jobs
        WHERE lease_id = (SELECT id FROM lease) AND next_poll_at IS NOT NULL
          AND created_at < $5 AND id NOT IN (SELECT unnest($4::uuid[]))
        ORDER BY id
        FOR NO KEY UPDATE
    )
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM lease) AS lives,
    (SELECT count(*) FROM strays) AS freed,
    ARRAY(
        SELECT held.id FROM unnest($4::uuid[]) AS held(id)
        WHERE NOT EXISTS (
            SELECT 1 FROM jobs WHERE jobs.id = held.id AND jobs.lease_id = $1 AND jobs.next_poll_at IS NOT NULL
        )
    ) AS not_covered";

#[derive(QueryableByName)]
struct Renewal {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    lives: bool,
    #[diesel(sql_type = BigInt)]
    freed: i64,
    #[diesel(sql_type = Array<diesel::sql_types::Uuid>)]
    not_covered: Vec<uuid::Uuid>,
}

/// Starts a new lease (one started before is left as it is, so that a lease never lives
/// again), and frees the open jobs that name a lease no longer kept (ended or forgotten before
/// its jobs were freed, or from before leases were forgotten by claims), which no claim would
/// find otherwise. Rare enough (a driver starts a lease when it starts and when it lost one) to
/// walk the open jobs.
const START_LEASE: &str = "
WITH orphans AS (
    UPDATE jobs SET lease_id = NULL
    WHERE next_poll_at IS NOT NULL AND lease_id IS NOT NULL AND lease_id <> $1
      AND NOT EXISTS (SELECT 1 FROM job_leases WHERE job_leases.id = jobs.lease_id)
)
INSERT INTO job_leases (id, lives_until) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING";

/// Ends the lease `$1` and frees its open jobs for any driver to claim.
const END_LEASE: &str = "
WITH freed AS (
    UPDATE jobs SET lease_id = NULL WHERE lease_id = $1 AND next_poll_at IS NOT NULL
)
DELETE FROM job_leases WHERE id = $1";
