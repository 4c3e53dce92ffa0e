//! Accepting a job: one statement without an idempotency key (conditional hold, job, ledger
//! row, shared with the plain accepts that arrive meanwhile; for a key with a budget also its
//! row locked and its budget counter checked and raised),
//! a transaction with one, for a key with a concurrency limit of its own or with a parent (the
//! rows of the key and every key above it locked, root first; each one's counter read and its
//! subtree's jobs counted; the account locked; then all checked); and the
//! pruning of old idempotency records. Either way a refusal is named by the state its check saw.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{KeyPrefix, LeaseId};
use genjobs_domain::job::Job;
use genjobs_domain::keys::{KeyBudget, check_budget};
use genjobs_domain::ports::{
    AcceptError, Accepted, AccountStore, Credential, IDEMPOTENCY_RETENTION, IdempotencyClaim, StoreError,
};
use time::OffsetDateTime;

use super::PgStore;
use super::keys::{count_against_budget, counter_start, descendants_used, lock_key_chain, subtree_active};
use crate::error::{TxError, from_diesel};
use crate::pool::{Durability, count_job_commit};
use crate::rows::{AcceptBudgeted, JobRow, amount, credits};
use crate::schema::{idempotency_keys, jobs, ledger, users};

/// How often an accept races another request with the same idempotency key, or another change
/// of the account between its snapshot and its hold, before giving up.
pub(super) const ACCEPT_ATTEMPTS: usize = 3;

/// What an accept statement saw: the credits available, the active jobs and the concurrent-job
/// limit in its snapshot, how many jobs it inserted, and the key's used and budget when it
/// checked one.
type Seen = (i64, i32, i32, i64, Option<i64>, Option<i64>);

/// Why an accept's transaction rolled back.
pub(super) enum Refusal {
    /// Refused, for the caller.
    Accept(AcceptError),
    /// Another request recorded the same idempotency key meanwhile: run again.
    RetryIdempotency,
}

/// Why a hold was refused, from the account as the check saw it: the credits first, then the
/// concurrent-job limit (402 comes before 429).
fn refusal(available: i64, limit: i32, needed: Credits) -> AcceptError {
    if available < i64::try_from(needed.get()).unwrap_or(i64::MAX) {
        AcceptError::InsufficientCredits { needed, available: Credits::new(u64::try_from(available).unwrap_or(0)) }
    } else {
        AcceptError::ConcurrencyLimit { limit: u32::try_from(limit).unwrap_or(0) }
    }
}

impl PgStore {
    async fn try_accept(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyClaim>,
        lease: Option<LeaseId>,
        now: OffsetDateTime,
    ) -> Result<Result<Accepted, Refusal>, StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            let row = JobRow { lease_id: lease.map(|l| l.as_uuid()), ..JobRow::from_job(job)? };
            let held = amount(job.credits_held())?;
            let user_id = job.user_id().as_uuid();
            let fresh_after = now - IDEMPOTENCY_RETENTION;
            let outcome = conn
                .transaction(async |conn| -> Result<Accepted, TxError<Refusal>> {
                    if let Some(claim) = idempotency
                        && let Some(job_id) = claimed_job(conn, user_id, claim, fresh_after).await?
                    {
                        let original = jobs::table.find(job_id).select(JobRow::as_select()).first(conn).await?;
                        let original = original.into_job().map_err(|e| TxError::Refused(Refusal::Accept(e.into())))?;
                        return Ok(Accepted::Replayed(original));
                    }
                    let ChainCheck { own_budget, budget_refusal, limit_refusal } =
                        check_key_chain(conn, job.key_prefix(), job.credits_held(), now, true).await?;
                    // The account is locked and checked in this transaction, so that a refusal names
                    // the check that refused it. Its admitted batch items never refuse this job.
                    let account: Option<(i64, i32, i32)> = users::table
                        .find(user_id)
                        .select((
                            users::credits_available,
                            users::active_jobs - users::admitted_batch_items,
                            users::max_concurrent_jobs,
                        ))
                        .for_update()
                        .first(conn)
                        .await
                        .optional()?;
                    let Some((available, active, limit)) = account else {
                        return Err(TxError::Refused(Refusal::Accept(AcceptError::UnknownUser)));
                    };
                    if available < held {
                        return Err(TxError::Refused(Refusal::Accept(refusal(available, limit, job.credits_held()))));
                    }
                    if let Some(refused) = budget_refusal {
                        return Err(TxError::Refused(Refusal::Accept(refused)));
                    }
                    if active >= limit {
                        return Err(TxError::Refused(Refusal::Accept(refusal(available, limit, job.credits_held()))));
                    }
                    if let Some(refused) = limit_refusal {
                        return Err(TxError::Refused(Refusal::Accept(refused)));
                    }
                    diesel::update(users::table.find(user_id))
                        .set((
                            users::credits_available.eq(users::credits_available - held),
                            users::credits_held.eq(users::credits_held + held),
                            users::active_jobs.eq(users::active_jobs + 1),
                        ))
                        .execute(conn)
                        .await?;
                    let counted_under = count_hold(conn, own_budget, job.key_prefix(), held).await?;
                    diesel::insert_into(jobs::table)
                        .values((&row, jobs::budget_period_start.eq(counted_under)))
                        .execute(conn)
                        .await?;
                    diesel::insert_into(ledger::table)
                        .values((
                            ledger::user_id.eq(user_id),
                            ledger::job_id.eq(Some(row.id)),
                            ledger::kind.eq("hold"),
                            ledger::amount.eq(held),
                        ))
                        .execute(conn)
                        .await?;
                    if let Some(claim) = idempotency {
                        record_claim(conn, user_id, claim, row.id, now).await?;
                    }
                    Ok(Accepted::Created(job.clone()))
                })
                .await;
            match outcome {
                Ok(accepted) => {
                    if matches!(accepted, Accepted::Created(_)) {
                        count_job_commit(Durability::Durable);
                    }
                    Ok(Ok(accepted))
                }
                Err(TxError::Refused(refusal)) => Ok(Err(refusal)),
                Err(TxError::Db(e)) => Err(from_diesel(e)),
            }
        })
        .await
    }

    /// Accepts a job without an idempotency key in one statement (so one round trip and one
    /// implicit transaction), which it shares with the plain accepts that arrive meanwhile (see
    /// [`crate::group_accept`]): the conditional hold on the account row, the job and its ledger
    /// row are written only if the hold matched. A refusal is named from the account as that
    /// statement saw it; when that snapshot would have passed both checks, another transaction
    /// changed the account between the snapshot and the hold, and the statement runs again on a
    /// fresh snapshot. Should every attempt race so, the account is locked and checked instead
    /// (the path with an idempotency key), so that the refusal is still named by its true check.
    ///
    /// With `budget` (the key's, as its cached credentials say) the statement is
    /// [`AcceptBudgeted`]: the key's budget is checked between the credits and the concurrency,
    /// from the key's row as the statement locked it. A key it did not find with that budget's
    /// period (changed meanwhile), or that has children (whose jobs its budget counts too, which
    /// its counter does not), takes the transaction, which reads the key's settings itself.
    async fn accept_in_one_statement(
        &self,
        job: Job,
        budget: Option<KeyBudget>,
        lease: Option<LeaseId>,
        now: OffsetDateTime,
    ) -> Result<Accepted, AcceptError> {
        let row = JobRow { lease_id: lease.map(|l| l.as_uuid()), ..JobRow::from_job(&job)? };
        let held = amount(job.credits_held())?;
        let mut attempt = 1;
        loop {
            let seen: Option<Seen> = match budget {
                // Bounded by the deadline as a whole, the wait for the group ahead included.
                None => self.within(self.accepts.accept(&self.db, row.clone())).await?.map(
                    |(available, active, limit, inserted)| (available, active, limit, i64::from(inserted), None, None),
                ),
                Some(budget) => {
                    let accept = AcceptBudgeted {
                        row: &row,
                        period_start: counter_start(budget.period.start(now)),
                        period: budget.period.as_str(),
                    };
                    let seen = self.in_session(async |conn| accept.get_result(conn).await.optional()).await?;
                    match seen {
                        Some((_, _, _, _, None, _) | (_, _, _, _, _, None)) => break,
                        seen => seen,
                    }
                }
            };
            let Some((available, active, limit, inserted, used, credits_budget)) = seen else {
                return Err(AcceptError::UnknownUser);
            };
            if inserted == 1 {
                count_job_commit(Durability::Durable);
                self.jobs_cache.keep_new(&job);
                return Ok(Accepted::Created(job));
            }
            if available < held {
                return Err(refusal(available, limit, job.credits_held()));
            }
            if let (Some(budget), Some(used), Some(credits_budget)) = (budget, used, credits_budget) {
                let budget = KeyBudget { credits: credits(credits_budget)?, ..budget };
                check_budget(budget, credits(used)?, job.credits_held()).map_err(AcceptError::KeyBudgetExceeded)?;
            }
            if active >= limit {
                return Err(refusal(available, limit, job.credits_held()));
            }
            if attempt == ACCEPT_ATTEMPTS {
                break;
            }
            attempt += 1;
        }
        match self.try_accept(&job, None, lease, now).await? {
            Ok(accepted) => Ok(accepted),
            Err(Refusal::Accept(refusal)) => Err(refusal),
            Err(Refusal::RetryIdempotency) => Err(StoreError::Internal("no idempotency key to race".into()).into()),
        }
    }
}

/// The job an earlier request with `claim`'s key made, within the retention (`fresh_after`
/// on), when its body was the same; a record older than that is deleted.
///
/// # Errors
/// [`AcceptError::IdempotencyConflict`] when the key was used with another body.
pub(super) async fn claimed_job(
    conn: &mut AsyncPgConnection,
    user_id: uuid::Uuid,
    claim: &IdempotencyClaim,
    fresh_after: OffsetDateTime,
) -> Result<Option<uuid::Uuid>, TxError<Refusal>> {
    let earlier: Option<(String, uuid::Uuid, OffsetDateTime)> = idempotency_keys::table
        .find((user_id, &claim.key))
        .select((idempotency_keys::fingerprint, idempotency_keys::job_id, idempotency_keys::created_at))
        .first(conn)
        .await
        .optional()?;
    match earlier {
        Some((_, _, created_at)) if created_at <= fresh_after => {
            diesel::delete(
                idempotency_keys::table.find((user_id, &claim.key)).filter(idempotency_keys::created_at.eq(created_at)),
            )
            .execute(conn)
            .await?;
            Ok(None)
        }
        Some((fingerprint, _, _)) if fingerprint != claim.fingerprint => {
            Err(TxError::Refused(Refusal::Accept(AcceptError::IdempotencyConflict)))
        }
        Some((_, job_id, _)) => Ok(Some(job_id)),
        None => Ok(None),
    }
}

/// Records `claim` as made by the request that made job `job_id`.
///
/// # Errors
/// [`Refusal::RetryIdempotency`] when another request recorded the same key meanwhile.
pub(super) async fn record_claim(
    conn: &mut AsyncPgConnection,
    user_id: uuid::Uuid,
    claim: &IdempotencyClaim,
    job_id: uuid::Uuid,
    now: OffsetDateTime,
) -> Result<(), TxError<Refusal>> {
    let recorded = diesel::insert_into(idempotency_keys::table)
        .values((
            idempotency_keys::user_id.eq(user_id),
            idempotency_keys::key.eq(&claim.key),
            idempotency_keys::fingerprint.eq(&claim.fingerprint),
            idempotency_keys::job_id.eq(job_id),
            idempotency_keys::created_at.eq(now),
        ))
        .on_conflict_do_nothing()
        .execute(conn)
        .await?;
    if recorded == 0 {
        return Err(TxError::Refused(Refusal::RetryIdempotency));
    }
    Ok(())
}

/// What the chain of keys of a hold says, each key's row locked: the key's own budget counter
/// that the hold raises (used by the key's own jobs, period start), and the first refusal of a
/// budget and of a concurrency limit, if any, named by the key that refused.
pub(super) struct ChainCheck {
    pub(super) own_budget: Option<(i64, OffsetDateTime)>,
    pub(super) budget_refusal: Option<AcceptError>,
    pub(super) limit_refusal: Option<AcceptError>,
}

/// Locks the key of `prefix` and every key above it and checks a hold of `held` at `now`
/// against each one's budget, and, with `count_concurrency`, its subtree's jobs against its
/// concurrency limit.
pub(super) async fn check_key_chain(
    conn: &mut AsyncPgConnection,
    prefix: Option<&KeyPrefix>,
    held: Credits,
    now: OffsetDateTime,
    count_concurrency: bool,
) -> Result<ChainCheck, TxError<Refusal>> {
    let refused = |e: StoreError| TxError::Refused(Refusal::Accept(e.into()));
    // The key and every key above it are locked before the account, the root first (every
    // transaction that locks keys does so in this order, and two chains share only a path from
    // the root), so that accepts on one subtree count its jobs one after the other: none misses
    // another's hold.
    let chain = match prefix {
        Some(prefix) => lock_key_chain(conn, prefix.as_str()).await?,
        None => Vec::new(),
    };
    let mut check = ChainCheck { own_budget: None, budget_refusal: None, limit_refusal: None };
    for (depth, key) in chain.into_iter().enumerate() {
        let settings = key.settings.into_settings().map_err(refused)?;
        if let Some(budget) = settings.budget {
            let start = counter_start(budget.period.start(now));
            let (counted_since, counted) = key.counter;
            let own = if counted_since == Some(start) { counted } else { 0 };
            let below = if key.has_children { descendants_used(conn, &key.prefix, Some(start)).await? } else { 0 };
            if depth == 0 {
                check.own_budget = Some((own, start));
            }
            let used = credits(own + below).map_err(refused)?;
            if let Err(exceeded) = check_budget(budget, used, held) {
                let exceeded = if depth == 0 { exceeded } else { exceeded.by_ancestor() };
                check.budget_refusal.get_or_insert(AcceptError::KeyBudgetExceeded(exceeded));
            }
        }
        if count_concurrency
            && let Some(limit) = settings.max_concurrent_jobs
            && subtree_active(conn, &key.prefix, key.has_children).await? >= i64::from(limit)
        {
            check.limit_refusal.get_or_insert(AcceptError::KeyConcurrencyLimit { limit });
        }
    }
    Ok(check)
}

/// Raises the counter of the key of `prefix` by `held` when the key's own budget counts the
/// hold (`own_budget`, from [`check_key_chain`]); the start of the period the hold is counted
/// under, for its jobs to record.
pub(super) async fn count_hold(
    conn: &mut AsyncPgConnection,
    own_budget: Option<(i64, OffsetDateTime)>,
    prefix: Option<&KeyPrefix>,
    held: i64,
) -> Result<Option<OffsetDateTime>, diesel::result::Error> {
    match (own_budget, prefix) {
        (Some((own, start)), Some(prefix)) => {
            Ok(Some(count_against_budget(conn, prefix.as_str(), start, own + held).await?))
        }
        _ => Ok(None),
    }
}

impl PgStore {
    /// Deletes the idempotency records created before `before`; how many. The in-memory store
    /// prunes on every accept; here [`crate::connect`] runs this every
    /// [`IDEMPOTENCY_PRUNE_INTERVAL`], so records live at least 24 hours and not much longer.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn prune_idempotency(&self, before: OffsetDateTime) -> Result<usize, StoreError> {
        let prune = diesel::delete(idempotency_keys::table.filter(idempotency_keys::created_at.lt(before)));
        self.in_session(async |conn| prune.execute(conn).await).await
    }
}

/// How often each replica prunes idempotency records older than the retention.
pub const IDEMPOTENCY_PRUNE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(600);

impl PgStore {
    /// How `job`'s key limits its jobs, as its credentials (cached, and evicted on every replica
    /// when its settings change) say: its budget, if any, and whether its accept takes the
    /// transaction that locks its chain of keys and counts their subtrees' jobs: for a key with
    /// a concurrency limit of its own, and for any key with a parent (its ancestors' limits are
    /// read from their locked rows, never from a cache). A key's parent never changes, so a
    /// cached credential says rightly whether it has one.
    async fn key_limits(&self, job: &Job) -> Result<(Option<KeyBudget>, bool), StoreError> {
        let Some(prefix) = job.key_prefix() else { return Ok((None, false)) };
        let credentials = self.credentials(prefix).await?;
        let Some(credential) = <[Credential]>::first(&credentials) else { return Ok((None, false)) };
        let own = &credential.settings;
        let transaction = own.max_concurrent_jobs.is_some() || !credential.lineage.ancestors.is_empty();
        Ok((own.budget, transaction))
    }

    /// [`genjobs_domain::ports::JobStore::accept`]: see there.
    pub(super) async fn accept_job(
        &self,
        job: Job,
        idempotency: Option<IdempotencyClaim>,
        lease: Option<LeaseId>,
        now: OffsetDateTime,
    ) -> Result<Accepted, AcceptError> {
        if idempotency.is_none() {
            let (budget, concurrency_limited) = self.key_limits(&job).await?;
            if !concurrency_limited {
                return self.accept_in_one_statement(job, budget, lease, now).await;
            }
        }
        for _ in 0..ACCEPT_ATTEMPTS {
            match self.try_accept(&job, idempotency.as_ref(), lease, now).await? {
                Ok(accepted) => return Ok(accepted),
                Err(Refusal::Accept(refusal)) => return Err(refusal),
                Err(Refusal::RetryIdempotency) => continue,
            }
        }
        Err(StoreError::Internal("idempotency key kept racing".into()).into())
    }
}
