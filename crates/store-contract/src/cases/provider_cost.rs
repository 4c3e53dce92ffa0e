//! Providers' bills: a job's bill is kept with its final transition, and usage and the
//! reconciliation sum the bills alike before and after their day is sealed and purged.

use std::sync::Arc;

use genjobs_domain::catalog::{Billing, Cost, CostUnit, ProviderBill};
use genjobs_domain::decimal::Decimal;
use genjobs_domain::ids::UserId;
use genjobs_domain::job::{Job, JobError, JobErrorCode, Trigger, UpstreamRef};
use genjobs_domain::ports::{ReconciliationQuery, UsageGrouping, UsageQuery};

use super::{Store, accepted, now, step, success, user};

fn d(text: &str) -> Decimal {
    text.parse().expect("a decimal")
}

/// A job of `user_id` holding `held`, sent to `provider` as `request` on a route costing
/// `usd` an image, on the key ending in `hint`.
async fn billed_job<S: Store>(store: &S, user_id: UserId, held: u64, at: (&str, &str), usd: &str, hint: &str) -> Job {
    let job = accepted(store, user_id, held).await;
    let started = step(store, &job, Trigger::SubmitStarted { next_poll_at: now() }).await;
    let billing = Billing { cost: Cost { per: CostUnit::Image, usd: d(usd) }, key_hint: Some(hint.to_owned()) };
    let (provider, request) = at;
    let upstream = UpstreamRef::new(provider, request);
    step(store, &started, Trigger::Submitted { upstream, next_poll_at: now(), billing: Some(billing) }).await
}

/// The provider's success delivering one image charged `actual`, reporting `reported` units.
fn success_reporting(actual: u64, reported: Option<&str>) -> Trigger {
    match success(actual) {
        Trigger::Succeeded { outputs, credits_actual, .. } => {
            Trigger::Succeeded { outputs, credits_actual, reported_units: reported.map(d) }
        }
        other => other,
    }
}

/// A job's route cost is kept from its submission, and its bill from its final transition:
/// units, units charged and cost read back as committed; a failed job's bill is 0 unless its
/// provider reported units, which it keeps with 0 charged.
pub async fn a_jobs_bill_is_kept_with_its_final_transition<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let sent = billed_job(&*store, id, 10, ("fal", "req-b1"), "0.04", "abcd").await;
    let read = store.job(sent.id()).await.expect("read").expect("stored");
    assert_eq!(read.billing().map(|b| (b.cost.usd, b.key_hint.clone())), Some((d("0.04"), Some("abcd".into()))));
    assert_eq!(read.provider_bill(), None, "no bill before the end");
    let done = step(&*store, &read, success_reporting(10, Some("3"))).await;
    let bill = ProviderBill { units: d("3"), units_charged: Some(d("1")), cost_usd: d("0.12") };
    assert_eq!(done.provider_bill(), Some(&bill));
    assert_eq!(store.job(sent.id()).await.expect("read").expect("stored").provider_bill(), Some(&bill));
    let failed = billed_job(&*store, id, 10, ("fal", "req-b2"), "0.04", "abcd").await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
    let failed = step(&*store, &failed, Trigger::failed(error)).await;
    let nothing = ProviderBill { units: Decimal::ZERO, units_charged: Some(Decimal::ZERO), cost_usd: Decimal::ZERO };
    assert_eq!(store.job(failed.id()).await.expect("read").expect("stored").provider_bill(), Some(&nothing));
    let billed = billed_job(&*store, id, 10, ("fal", "req-b3"), "0.04", "abcd").await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "ran, then crashed");
    step(&*store, &billed, Trigger::Failed { error, reported_units: Some(d("2")) }).await;
    let billed_anyway = ProviderBill { units: d("2"), units_charged: Some(Decimal::ZERO), cost_usd: d("0.08") };
    assert_eq!(store.job(billed.id()).await.expect("read").expect("stored").provider_bill(), Some(&billed_anyway));
}

/// Jobs purged before their day is sealed add their counts and bills to what every report
/// reads: usage by model (and the other groupings) and by provider key, and the reconciliation,
/// read the same after the purge, and after the day is sealed.
pub async fn purged_jobs_keep_their_bills_in_every_report<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    for (request, hint) in [("req-p1", "wxyz"), ("req-p2", "wxyz"), ("req-p3", "pqrs")] {
        let sent = billed_job(&*store, id, 10, ("fal", request), "0.05", hint).await;
        step(&*store, &sent, success_reporting(8, None)).await;
    }
    let failed = billed_job(&*store, id, 10, ("fal", "req-p4"), "0.05", "pqrs").await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "ran, then crashed");
    step(&*store, &failed, Trigger::Failed { error, reported_units: Some(d("1")) }).await;
    let day = now().date();
    let report = async |group_by: UsageGrouping| {
        let query = UsageQuery { user_id: None, keys: None, from: day, to: day, group_by };
        let rows = store.usage(query).await.expect("usage");
        rows.iter()
            .map(|r| (r.model.clone(), r.provider_key.clone(), r.jobs, r.failed, r.credits_spent, r.provider_cost_usd))
            .collect::<Vec<_>>()
    };
    let reconciled = async || {
        let query = ReconciliationQuery { from: day, to: day, provider: None };
        let rows = store.reconciliation(query).await.expect("reconciliation").rows;
        rows.iter().map(|r| (r.key_hint.clone(), r.jobs, r.units, r.cost_usd)).collect::<Vec<_>>()
    };
    let by_model = vec![(Some("nano-banana".to_owned()), None, 4, 1, 24, d("0.2"))];
    let by_key =
        vec![(None, Some("pqrs".to_owned()), 2, 1, 8, d("0.1")), (None, Some("wxyz".to_owned()), 2, 0, 16, d("0.1"))];
    let bills = vec![(Some("pqrs".to_owned()), 2, d("2"), d("0.1")), (Some("wxyz".to_owned()), 2, d("2"), d("0.1"))];
    assert_eq!(report(UsageGrouping::Model).await, by_model);
    assert_eq!(report(UsageGrouping::ProviderKey).await, by_key);
    assert_eq!(reconciled().await, bills);
    let later = now() + time::Duration::hours(1);
    assert_eq!(store.purge_final_jobs(later, 10).await.expect("purge"), 4);
    assert_eq!(report(UsageGrouping::Model).await, by_model, "purged jobs count by model");
    assert_eq!(report(UsageGrouping::ProviderKey).await, by_key, "purged jobs count by provider key");
    assert_eq!(reconciled().await, bills, "purged jobs' bills stay per key");
    store.seal_usage(super::sealing::today_ready()).await.expect("seal");
    assert_eq!(report(UsageGrouping::Model).await, by_model, "and once the day is sealed");
    assert_eq!(report(UsageGrouping::ProviderKey).await, by_key);
    assert_eq!(reconciled().await, bills);
}

/// Usage by provider key sums the bills; the reconciliation gives each day, provider and key's
/// jobs, units and cost, and the jobs billed more units than charged; both read the same once
/// the day is sealed and its jobs purged (the purged jobs' mismatches go with them).
pub async fn usage_and_reconciliation_sum_the_bills_before_and_after_sealing<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    for (request, reported) in [("req-r1", None), ("req-r2", Some("2"))] {
        let sent = billed_job(&*store, id, 10, ("fal", request), "0.05", "wxyz").await;
        step(&*store, &sent, success_reporting(8, reported)).await;
    }
    let other = billed_job(&*store, id, 10, ("replicate", "req-r3"), "0.5", "pqrs").await;
    step(&*store, &other, success_reporting(10, None)).await;
    let day = now().date();
    let by_key = async || {
        let query = UsageQuery { user_id: None, keys: None, from: day, to: day, group_by: UsageGrouping::ProviderKey };
        let rows = store.usage(query).await.expect("usage");
        rows.iter().map(|r| (r.provider_key.clone(), r.jobs, r.credits_spent, r.provider_cost_usd)).collect::<Vec<_>>()
    };
    let expected_usage = vec![(Some("pqrs".to_owned()), 1, 10, d("0.5")), (Some("wxyz".to_owned()), 2, 16, d("0.15"))];
    assert_eq!(by_key().await, expected_usage);
    let reconcile = async |provider: Option<&str>| {
        let query = ReconciliationQuery { from: day, to: day, provider: provider.map(str::to_owned) };
        store.reconciliation(query).await.expect("reconciliation")
    };
    let all = reconcile(None).await;
    let rows: Vec<_> = all
        .rows
        .iter()
        .map(|r| (r.day, r.provider.as_str(), r.key_hint.as_deref(), r.jobs, r.units, r.cost_usd))
        .collect();
    let expected_rows =
        vec![(day, "fal", Some("wxyz"), 2, d("3"), d("0.15")), (day, "replicate", Some("pqrs"), 1, d("1"), d("0.5"))];
    assert_eq!(rows, expected_rows);
    let mismatches: Vec<_> =
        all.mismatches.iter().map(|m| (m.model.as_str(), m.units_charged, m.units_reported)).collect();
    assert_eq!(mismatches, vec![("nano-banana", d("1"), d("2"))]);
    let fal = reconcile(Some("replicate")).await;
    assert_eq!((fal.rows.len(), fal.mismatches.len()), (1, 0), "only the provider asked for");
    let ready = super::sealing::today_ready();
    assert_eq!(store.seal_usage(ready).await.expect("seal"), Some(super::sealing::tomorrow()));
    assert_eq!(by_key().await, expected_usage, "a sealed day reads the same");
    assert_eq!(store.purge_final_jobs(ready, 10).await.expect("purge"), 3);
    assert_eq!(by_key().await, expected_usage, "purged jobs' bills stay in the rollup");
    let sealed = reconcile(None).await;
    let rows: Vec<_> = sealed
        .rows
        .iter()
        .map(|r| (r.day, r.provider.as_str(), r.key_hint.as_deref(), r.jobs, r.units, r.cost_usd))
        .collect();
    assert_eq!(rows, expected_rows, "the rollup keeps the bills per key");
    assert!(sealed.mismatches.is_empty(), "a purged job's mismatch goes with it");
}
