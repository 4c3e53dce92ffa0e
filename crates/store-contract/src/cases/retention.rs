//! Retention: purging old final jobs removes them and nothing else, and usage reads the same.

use std::sync::Arc;

use genjobs_domain::job::{JobError, JobErrorCode, Trigger};
use genjobs_domain::ports::{UsageGrouping, UsageQuery};
use time::Duration;

use super::{Store, accepted, now, step, submitted, success, user};

/// Purging removes final jobs finished before the cut, oldest first and at most `limit` at a
/// time; running jobs stay; their ledger records stay; usage by day, model and user reads the
/// same before and after.
pub async fn purging_final_jobs_keeps_the_ledger_and_usage<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let succeeded = step(&*store, &submitted(&*store, &accepted(&*store, id, 20).await).await, success(15)).await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
    let failed = step(&*store, &accepted(&*store, id, 10).await, Trigger::Failed { error }).await;
    let running = accepted(&*store, id, 5).await;
    let day = now().date();
    let reports = async || {
        let mut all = Vec::new();
        for group_by in [UsageGrouping::Day, UsageGrouping::Model, UsageGrouping::User] {
            let query =
                UsageQuery { user_id: Some(id), from: day - Duration::days(1), to: day + Duration::days(1), group_by };
            all.push(store.usage(query).await.expect("usage"));
        }
        all
    };
    let before = reports().await;
    let ledger = store.ledger(id, None, 100).await.expect("ledger");
    let cut = now() + Duration::seconds(1);

    assert_eq!(store.purge_final_jobs(cut, 1).await.expect("purge"), 1, "at most the limit");
    assert_eq!(store.job(succeeded.id()).await.expect("read"), None, "the oldest final job goes first");
    assert!(store.job(failed.id()).await.expect("read").is_some());
    assert_eq!(store.purge_final_jobs(cut, 10).await.expect("purge"), 1, "only final jobs");
    assert_eq!(store.job(failed.id()).await.expect("read"), None);
    assert_eq!(store.job(running.id()).await.expect("read"), Some(running), "a running job stays");
    assert_eq!(store.purge_final_jobs(cut, 10).await.expect("purge"), 0);

    assert_eq!(reports().await, before, "usage reads the same after the purge");
    assert_eq!(store.ledger(id, None, 100).await.expect("ledger"), ledger, "the ledger stays");
    assert_eq!(store.purge_final_jobs(now() - Duration::days(1), 10).await.expect("purge"), 0, "nothing older");
}
