//! The usage port in memory: the ledger as recorded, and reports that count the live jobs created
//! since the last seal plus the rollup, which holds purged jobs and sealed hours, as the Postgres
//! store does, so that both answer every report alike.

use std::collections::BTreeMap;

use async_trait::async_trait;
use genjobs_domain::credits::Credits;
use genjobs_domain::decimal::Decimal;
use genjobs_domain::ids::{JobId, KeyPrefix, UserId};
use genjobs_domain::job::{Job, JobErrorCode, JobState, UpstreamRef};
use genjobs_domain::ports::{
    LedgerRecord, Reconciliation, ReconciliationQuery, SealStretch, StoreError, UsageGrouping, UsageQuery, UsageRow,
    UsageStore,
};
use time::{Date, OffsetDateTime};

use super::{MemoryStore, State};

/// What a report counts of a job: its creation day, user, model, provider, key prefix and
/// provider key.
pub(super) type Group = (Date, UserId, String, Option<String>, Option<String>, Option<String>);

/// What usage reports count besides the live jobs.
#[derive(Debug, Default)]
pub(super) struct Rollup {
    pub(super) counted: BTreeMap<Group, Counts>,
    /// The first instant not sealed: reports read the jobs created before it from `counted` alone.
    sealed_before: Option<OffsetDateTime>,
}

impl Rollup {
    pub(super) fn is_sealed(&self, job: &Job) -> bool {
        self.sealed_before.is_some_and(|before| job.created_at() < before)
    }

    fn add(&mut self, job: &Job) {
        self.counted.entry(group_of(job)).or_default().add(Counts::of(job));
    }
}

/// Jobs counted as a usage report counts them, with their providers' bills.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    jobs: u64,
    succeeded: u64,
    failed: u64,
    canceled: u64,
    credits_spent: u64,
    pub(super) billed: u64,
    pub(super) provider_units: Decimal,
    pub(super) provider_cost: Decimal,
    content_refused: u64,
}

impl Counts {
    pub(super) fn of(job: &Job) -> Counts {
        let is = |state: JobState| u64::from(job.state() == state);
        Counts {
            jobs: 1,
            succeeded: is(JobState::Succeeded),
            failed: is(JobState::Failed),
            canceled: is(JobState::Canceled),
            credits_spent: job.credits_actual().map_or(0, Credits::get),
            billed: u64::from(job.provider_bill().is_some()),
            provider_units: job.provider_bill().map_or(Decimal::ZERO, |bill| bill.units),
            provider_cost: job.provider_bill().map_or(Decimal::ZERO, |bill| bill.cost_usd),
            content_refused: u64::from(job.error().is_some_and(|e| e.code == JobErrorCode::ContentRefused)),
        }
    }

    pub(super) fn add(&mut self, other: Counts) {
        self.jobs += other.jobs;
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.canceled += other.canceled;
        self.credits_spent += other.credits_spent;
        self.billed += other.billed;
        self.provider_units = self.provider_units.plus(other.provider_units);
        self.provider_cost = self.provider_cost.plus(other.provider_cost);
        self.content_refused += other.content_refused;
    }
}

pub(crate) fn utc_day(at: OffsetDateTime) -> Date {
    at.to_offset(time::UtcOffset::UTC).date()
}

/// Every job's counts by group: the live jobs created since the last seal, then the rollup
/// (sealed hours and purged jobs), for the reports to fold as they group.
pub(super) fn counted(state: &State) -> impl Iterator<Item = (Group, Counts)> + '_ {
    let live = state
        .jobs
        .values()
        .filter(|row| !state.rollup.is_sealed(&row.job))
        .map(|row| (group_of(&row.job), Counts::of(&row.job)));
    live.chain(state.rollup.counted.iter().map(|(group, counts)| (group.clone(), *counts)))
}

pub(super) fn group_of(job: &Job) -> Group {
    (
        utc_day(job.created_at()),
        job.user_id(),
        job.model().to_string(),
        job.upstream().map(|upstream| upstream.provider().to_owned()),
        job.key_prefix().map(|prefix| prefix.as_str().to_owned()),
        job.billing().and_then(|billing| billing.key_hint.clone()),
    )
}

#[async_trait]
impl UsageStore for MemoryStore {
    async fn ledger(
        &self,
        user_id: UserId,
        keys: Option<Vec<KeyPrefix>>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<LedgerRecord>, StoreError> {
        let state = self.state();
        let of_keys = |record: &LedgerRecord| {
            keys.as_ref().is_none_or(|keys| {
                let key = record.job_id.and_then(|id| state.jobs.get(&id)).and_then(|row| row.job.key_prefix());
                key.is_some_and(|key| keys.contains(key))
            })
        };
        Ok(state
            .ledger
            .iter()
            .rev()
            .filter(|(owner, record)| {
                *owner == user_id && before.is_none_or(|before| record.sequence < before) && of_keys(record)
            })
            .take(limit)
            .map(|(_, record)| record.clone())
            .collect())
    }

    async fn job_ledger(&self, id: JobId) -> Result<Vec<LedgerRecord>, StoreError> {
        let state = self.state();
        Ok(state
            .ledger
            .iter()
            .filter(|(_, record)| record.job_id == Some(id))
            .map(|(_, record)| record.clone())
            .collect())
    }

    async fn usage(&self, query: UsageQuery) -> Result<Vec<UsageRow>, StoreError> {
        let state = self.state();
        type Key = (Option<Date>, Option<String>, Option<UserId>, Option<String>, Option<String>, Option<String>);
        let mut groups: BTreeMap<Key, Counts> = BTreeMap::new();
        for ((day, user, model, provider, key, provider_key), counts) in counted(&state) {
            let of_keys = query
                .keys
                .as_ref()
                .is_none_or(|keys| key.as_deref().is_some_and(|key| keys.iter().any(|k| k.as_str() == key)));
            if query.user_id.is_some_and(|only| only != user) || !(query.from..=query.to).contains(&day) || !of_keys {
                continue;
            }
            let key = match query.group_by {
                UsageGrouping::Day => (Some(day), None, None, None, None, None),
                UsageGrouping::Model => (None, Some(model), None, None, None, None),
                UsageGrouping::User => (None, None, Some(user), None, None, None),
                UsageGrouping::DayAndModel => (Some(day), Some(model), None, None, None, None),
                UsageGrouping::Provider => (None, None, None, provider, None, None),
                UsageGrouping::Key => (None, None, None, None, key, None),
                UsageGrouping::ProviderKey => (None, None, None, None, None, provider_key),
            };
            groups.entry(key).or_default().add(counts);
        }
        Ok(groups
            .into_iter()
            .map(|((day, model, user_id, provider, key, provider_key), c)| UsageRow {
                day,
                model,
                user_id,
                provider,
                key,
                provider_key,
                jobs: c.jobs,
                succeeded: c.succeeded,
                failed: c.failed,
                canceled: c.canceled,
                credits_spent: c.credits_spent,
                provider_cost_usd: c.provider_cost,
                content_refused: c.content_refused,
            })
            .collect())
    }

    async fn reconciliation(&self, query: ReconciliationQuery) -> Result<Reconciliation, StoreError> {
        Ok(crate::reconciliation::reconcile(&self.state(), &query))
    }

    async fn purge_final_jobs(&self, before: OffsetDateTime, limit: usize) -> Result<usize, StoreError> {
        let mut state = self.state();
        let mut expired: Vec<(OffsetDateTime, JobId)> = state
            .jobs
            .values()
            .filter_map(|row| row.job.finished_at().filter(|at| *at < before).map(|at| (at, row.job.id())))
            .filter(|(_, id)| !state.outbox.is_pending(*id))
            .collect();
        expired.sort_unstable();
        expired.truncate(limit);
        for (_, id) in &expired {
            let Some(row) = state.jobs.remove(id) else { continue };
            let job = row.job;
            if let Some(ids) = state.jobs_by_user.get_mut(&job.user_id()) {
                ids.remove(id);
            }
            if let Some(key) = job.upstream().map(UpstreamRef::key) {
                state.jobs_by_upstream_key.remove(key);
            }
            state.idempotency.retain(|_, record| record.job_id != *id);
            state.outbox.forget(*id);
            state.removed.remove(id);
            state.purged_key_charges.add(&job);
            if !state.rollup.is_sealed(&job) {
                state.rollup.add(&job);
            }
        }
        Ok(expired.len())
    }

    async fn seal_usage(&self, now: OffsetDateTime) -> Result<Option<OffsetDateTime>, StoreError> {
        let mut state = self.state();
        let oldest = || state.jobs.values().map(|row| row.job.created_at()).min();
        let Some(floor) = state.rollup.sealed_before.or_else(oldest) else { return Ok(None) };
        let Some(ready) = SealStretch::ready(floor, now) else { return Ok(None) };
        let within = |job: &Job| (ready.from..ready.until).contains(&job.created_at());
        let jobs = || state.jobs.values().map(|row| &row.job).filter(|job| within(job));
        let first_open = jobs().filter(|job| !job.state().is_final()).map(Job::created_at).min();
        let Some(stretch) = ready.before_open(first_open) else { return Ok(None) };
        let sealed: Vec<Job> = jobs().filter(|job| job.created_at() < stretch.until).cloned().collect();
        for job in &sealed {
            state.rollup.add(job);
        }
        state.rollup.sealed_before = Some(stretch.until);
        Ok(Some(stretch.until))
    }
}
