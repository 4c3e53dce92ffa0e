//! Sealing usage days, and usage by provider and by key: a sealed day reads the same from the rollup, is
//! sealed only once it is over and all its jobs are final, and its purged jobs count once.

use std::sync::Arc;

use genjobs_domain::ids::UserId;
use genjobs_domain::job::{JobError, JobErrorCode, Trigger};
use genjobs_domain::keys::KeySettings;
use genjobs_domain::ports::{Accepted, SEAL_AFTER, UsageGrouping, UsageQuery, UsageRow};
use time::Duration;

use super::{Store, accepted, key_with, keyed_job, now, step, submitted, success, user};

const GROUPINGS: [UsageGrouping; 7] = [
    UsageGrouping::Day,
    UsageGrouping::Model,
    UsageGrouping::User,
    UsageGrouping::DayAndModel,
    UsageGrouping::Provider,
    UsageGrouping::Key,
    UsageGrouping::ProviderKey,
];

/// Every report over yesterday to tomorrow, for `user_id` and for everyone.
async fn reports<S: Store>(store: &S, user_id: UserId) -> Vec<Vec<UsageRow>> {
    let day = now().date();
    let mut all = Vec::new();
    for only in [Some(user_id), None] {
        for group_by in GROUPINGS {
            let query = UsageQuery {
                user_id: only,
                keys: None,
                from: day - Duration::days(1),
                to: day + Duration::days(1),
                group_by,
            };
            all.push(store.usage(query).await.expect("usage"));
        }
    }
    all
}

/// Grouped by provider, the jobs a provider took count under its name and the others under none.
pub async fn usage_groups_jobs_by_the_provider_that_took_them<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    step(&*store, &submitted(&*store, &accepted(&*store, id, 20).await).await, success(15)).await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "no provider took it");
    step(&*store, &accepted(&*store, id, 10).await, Trigger::failed(error)).await;
    let day = now().date();
    let query = UsageQuery { user_id: Some(id), keys: None, from: day, to: day, group_by: UsageGrouping::Provider };
    let rows = store.usage(query).await.expect("usage");
    let by_provider: Vec<_> =
        rows.iter().map(|r| (r.provider.as_deref(), r.jobs, r.succeeded, r.failed, r.credits_spent)).collect();
    assert_eq!(by_provider, vec![(None, 1, 0, 1, 0), (Some("test"), 1, 1, 0, 15)]);
    assert!(rows.iter().all(|r| r.day.is_none() && r.model.is_none() && r.user_id.is_none()));
}

/// Grouped by key, a key's jobs count under its prefix, before and after their day is sealed and
/// purged, and jobs of no recorded key under none.
pub async fn usage_groups_jobs_by_the_key_that_submitted_them<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let prefix = key_with(&*store, id, KeySettings::default()).await;
    let keyed = match store.accept(keyed_job(id, &prefix, 20), None, None, now()).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("{other:?}"),
    };
    step(&*store, &submitted(&*store, &keyed).await, success(15)).await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
    step(&*store, &accepted(&*store, id, 10).await, Trigger::failed(error)).await;
    let day = now().date();
    let by_key = async || {
        let query = UsageQuery { user_id: Some(id), keys: None, from: day, to: day, group_by: UsageGrouping::Key };
        let rows = store.usage(query).await.expect("usage");
        rows.iter().map(|r| (r.key.clone(), r.jobs, r.succeeded, r.failed, r.credits_spent)).collect::<Vec<_>>()
    };
    let expected = vec![(None, 1, 0, 1, 0), (Some(prefix.as_str().to_owned()), 1, 1, 0, 15)];
    assert_eq!(by_key().await, expected);
    let ready = day.next_day().expect("a next day").midnight().assume_utc() + SEAL_AFTER;
    assert_eq!(store.seal_usage_day(ready).await.expect("seal"), Some(day));
    assert_eq!(store.purge_final_jobs(ready, 10).await.expect("purge"), 2);
    assert_eq!(by_key().await, expected, "the rollup keeps the key");
}

/// A day is sealed only once it ended [`SEAL_AFTER`] ago and none of its jobs runs; then every
/// report reads the same, it is not sealed twice, and purging its jobs changes no report.
pub async fn a_sealed_day_reads_the_same_and_counts_its_purged_jobs_once<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    step(&*store, &submitted(&*store, &accepted(&*store, id, 20).await).await, success(15)).await;
    let running = accepted(&*store, id, 5).await;
    let day = now().date();
    let ready = day.next_day().expect("a next day").midnight().assume_utc() + SEAL_AFTER;

    assert_eq!(store.seal_usage_day(ready - Duration::seconds(1)).await.expect("seal"), None, "too early");
    assert_eq!(store.seal_usage_day(ready).await.expect("seal"), None, "a job of the day still runs");
    let error = JobError::new(JobErrorCode::ContentRefused, "flagged").with_categories(vec!["violence".into()]);
    step(&*store, &running, Trigger::failed(error)).await;
    let before = reports(&*store, id).await;
    assert!(
        before.iter().all(|report| report.iter().map(|row| row.content_refused).sum::<u64>() == 1),
        "every grouping counts the refused job: {before:?}"
    );

    assert_eq!(store.seal_usage_day(ready).await.expect("seal"), Some(day));
    assert_eq!(reports(&*store, id).await, before, "reports read the sealed day from the rollup alike");
    assert_eq!(store.seal_usage_day(ready + Duration::days(3)).await.expect("seal"), None, "sealed once");
    assert_eq!(store.purge_final_jobs(ready, 10).await.expect("purge"), 2);
    assert_eq!(reports(&*store, id).await, before, "a sealed day's purged jobs are not counted again");
}
