//! Sealing usage, and usage by provider and by key: a sealed hour reads the same from the rollup,
//! is sealed only once it is over and all its jobs are final, and its purged jobs count once.

use std::sync::Arc;

use genjobs_domain::ids::UserId;
use genjobs_domain::job::{JobError, JobErrorCode, Trigger};
use genjobs_domain::keys::KeySettings;
use genjobs_domain::ports::{Accepted, SEAL_AFTER, UsageGrouping, UsageQuery, UsageRow, hour_start};
use time::{Duration, OffsetDateTime};

use super::{Store, accepted, key_with, keyed_job, new_job, now, step, submitted, success, user};

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
    let ready = today_ready();
    assert_eq!(store.seal_usage(ready).await.expect("seal"), Some(tomorrow()));
    assert_eq!(store.purge_final_jobs(ready, 10).await.expect("purge"), 2);
    assert_eq!(by_key().await, expected, "the rollup keeps the key");
}

/// The next UTC midnight.
pub(crate) fn tomorrow() -> OffsetDateTime {
    now().date().next_day().expect("a next day").midnight().assume_utc()
}

/// When every hour of today may be sealed.
pub(crate) fn today_ready() -> OffsetDateTime {
    tomorrow() + SEAL_AFTER
}

/// An hour is sealed only once it ended [`SEAL_AFTER`] ago and none of its jobs runs; then every
/// report reads the same, nothing is counted twice however often a seal comes, and purging the
/// sealed jobs changes no report.
pub async fn a_sealed_hour_reads_the_same_and_counts_its_purged_jobs_once<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    step(&*store, &submitted(&*store, &accepted(&*store, id, 20).await).await, success(15)).await;
    let running = accepted(&*store, id, 5).await;
    let next_hour = hour_start(running.created_at()) + Duration::hours(1);
    let ready = next_hour + SEAL_AFTER;

    assert_eq!(store.seal_usage(ready - Duration::seconds(1)).await.expect("seal"), None, "too early");
    assert_eq!(store.seal_usage(ready).await.expect("seal"), None, "a job of the hour still runs");
    let error = JobError::new(JobErrorCode::ContentRefused, "flagged").with_categories(vec!["violence".into()]);
    step(&*store, &running, Trigger::failed(error)).await;
    let before = reports(&*store, id).await;
    assert!(
        before.iter().all(|report| report.iter().map(|row| row.content_refused).sum::<u64>() == 1),
        "every grouping counts the refused job: {before:?}"
    );

    assert_eq!(store.seal_usage(ready).await.expect("seal"), Some(next_hour));
    assert_eq!(reports(&*store, id).await, before, "reports read the sealed hour from the rollup alike");
    assert_eq!(store.seal_usage(ready).await.expect("seal"), None, "sealed once");
    let later = ready + Duration::days(3);
    let day_end = next_hour.replace_time(time::Time::MIDNIGHT) + Duration::days(1);
    assert_eq!(store.seal_usage(later).await.expect("seal"), Some(day_end), "to the end of its day at most");
    assert_eq!(reports(&*store, id).await, before, "the hours after hold no job");
    assert_eq!(store.purge_final_jobs(ready, 10).await.expect("purge"), 2);
    assert_eq!(reports(&*store, id).await, before, "a sealed hour's purged jobs are not counted again");
}

/// The hours of a day are sealed as they end, up to the hour of the oldest job still running:
/// the jobs of the hours sealed read from the rollup and the later ones from the jobs, and every
/// report reads the same at each step, purged jobs included.
pub async fn the_hours_of_a_day_are_sealed_up_to_its_first_job_running<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let first = hour_start(now()) - Duration::hours(3);
    let created =
        async |at: OffsetDateTime, held: u64| match store.accept(new_job(id, held, at), None, None, now()).await {
            Ok(Accepted::Created(job)) => job,
            other => panic!("expected a created job, got {other:?}"),
        };
    let canceled = created(first + Duration::minutes(10), 20).await;
    step(&*store, &canceled, Trigger::Cancel).await;
    let running = created(first + Duration::minutes(70), 5).await;
    let failed = created(first + Duration::minutes(125), 7).await;
    step(&*store, &failed, Trigger::failed(JobError::new(JobErrorCode::UpstreamFailed, "boom"))).await;
    let before = reports(&*store, id).await;

    let at = first + Duration::hours(3) + SEAL_AFTER;
    // Each seal stops at a UTC midnight too: sealed again until nothing is left to seal.
    let sealed_all = async || {
        let mut last = None;
        while let Some(until) = store.seal_usage(at).await.expect("seal") {
            last = Some(until);
        }
        last
    };
    assert_eq!(sealed_all().await, Some(first + Duration::hours(1)), "up to the running job");
    assert_eq!(reports(&*store, id).await, before);
    assert_eq!(store.seal_usage(at).await.expect("seal"), None, "the running job holds its hour back");
    step(&*store, &running, Trigger::Cancel).await;
    let after = reports(&*store, id).await;
    assert_eq!(sealed_all().await, Some(first + Duration::hours(3)), "then the rest");
    assert_eq!(reports(&*store, id).await, after);
    assert_eq!(store.purge_final_jobs(now() + Duration::hours(1), 10).await.expect("purge"), 3);
    assert_eq!(reports(&*store, id).await, after, "purged, the sealed jobs count once");
}
