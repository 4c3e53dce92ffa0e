//! Retention: purging old final jobs removes them and nothing else; usage, and what keys' budgets
//! count, read the same.

use std::sync::Arc;

use genjobs_domain::credits::Credits;
use genjobs_domain::job::{JobError, JobErrorCode, Trigger};
use genjobs_domain::keys::BudgetPeriod;
use genjobs_domain::ports::{AcceptError, Accepted, UsageGrouping, UsageQuery};
use time::Duration;

use super::{Store, accepted, budget, key_with, keyed_job, now, step, submitted, success, user};

/// Purging removes final jobs finished before the cut, oldest first and at most `limit` at a
/// time; running jobs stay; their ledger records stay; usage by day, model and user reads the
/// same before and after, the jobs refused for their content included.
pub async fn purging_final_jobs_keeps_the_ledger_and_usage<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let succeeded = step(&*store, &submitted(&*store, &accepted(&*store, id, 20).await).await, success(15)).await;
    let error = JobError::new(JobErrorCode::ContentRefused, "flagged");
    let failed = step(&*store, &accepted(&*store, id, 10).await, Trigger::failed(error)).await;
    let running = accepted(&*store, id, 5).await;
    let day = now().date();
    let reports = async || {
        let mut all = Vec::new();
        for group_by in [UsageGrouping::Day, UsageGrouping::Model, UsageGrouping::User] {
            let query = UsageQuery {
                user_id: Some(id),
                keys: None,
                from: day - Duration::days(1),
                to: day + Duration::days(1),
                group_by,
            };
            all.push(store.usage(query).await.expect("usage"));
        }
        all
    };
    let before = reports().await;
    assert!(before.iter().all(|report| report.iter().map(|row| row.content_refused).sum::<u64>() == 1), "{before:?}");
    let ledger = store.ledger(id, None, None, 100).await.expect("ledger");
    let cut = now() + Duration::seconds(1);

    assert_eq!(store.purge_final_jobs(cut, 1).await.expect("purge"), 1, "at most the limit");
    assert_eq!(store.job(succeeded.id()).await.expect("read"), None, "the oldest final job goes first");
    assert!(store.job(failed.id()).await.expect("read").is_some());
    assert_eq!(store.purge_final_jobs(cut, 10).await.expect("purge"), 1, "only final jobs");
    assert_eq!(store.job(failed.id()).await.expect("read"), None);
    assert_eq!(store.job(running.id()).await.expect("read"), Some(running), "a running job stays");
    assert_eq!(store.purge_final_jobs(cut, 10).await.expect("purge"), 0);

    assert_eq!(reports().await, before, "usage reads the same after the purge");
    assert_eq!(store.ledger(id, None, None, 100).await.expect("ledger"), ledger, "the ledger stays");
    assert_eq!(store.purge_final_jobs(now() - Duration::days(1), 10).await.expect("purge"), 0, "nothing older");
}

/// Purging a key's final jobs keeps what they counted against its budget: its `used` reads the
/// same for every period that holds the day they were created, so a key cannot spend its purged
/// charges again; the next period starts from nothing.
pub async fn purging_a_keys_jobs_keeps_its_budget_used<S: Store>(store: Arc<S>) {
    let id = user(&*store, 1000).await;
    let prefix = key_with(&*store, id, budget(50, BudgetPeriod::Total)).await;
    let keyed = async |held| match store.accept(keyed_job(id, &prefix, held), None, None, now()).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("expected a created job, got {other:?}"),
    };
    let charged = step(&*store, &submitted(&*store, &keyed(30).await).await, success(20)).await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
    let failed = step(&*store, &keyed(10).await, Trigger::failed(error)).await;
    let periods =
        [None, BudgetPeriod::Day.start(now()), BudgetPeriod::Week.start(now()), BudgetPeriod::Month.start(now())];
    let used = async || {
        let mut all = Vec::new();
        for since in periods {
            all.push(store.key_used(&prefix, since).await.expect("used"));
        }
        all
    };
    assert_eq!(used().await, vec![Credits::new(20); 4], "the charge; the failed job counts nothing");

    assert_eq!(store.purge_final_jobs(now() + Duration::seconds(1), 10).await.expect("purge"), 2);
    assert_eq!(store.job(charged.id()).await.expect("read"), None);
    assert_eq!(store.job(failed.id()).await.expect("read"), None);
    assert_eq!(used().await, vec![Credits::new(20); 4], "every period still counts the purged charge");
    let tomorrow = BudgetPeriod::Day.start(now()).map(|today| today + Duration::days(1));
    assert_eq!(store.key_used(&prefix, tomorrow).await.expect("used"), Credits::ZERO, "the next day starts empty");

    let refused = store.accept(keyed_job(id, &prefix, 31), None, None, now()).await;
    assert!(matches!(refused, Err(AcceptError::KeyBudgetExceeded(e)) if e.used == Credits::new(20)), "{refused:?}");
    keyed(30).await;
    assert_eq!(store.key_used(&prefix, None).await.expect("used"), Credits::new(50), "up to the budget exactly");
}
