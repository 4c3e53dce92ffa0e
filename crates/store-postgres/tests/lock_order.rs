//! Statements that lock several jobs lock them in one order (their ids), so that the group
//! commits of two replicas touching the same jobs, side by side on different connections, never
//! wait for each other in a cycle: Postgres would abort one of them as a deadlock, and the
//! change it carried would be lost to an error.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::time::Duration;

use futures_util::future::join_all;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, UserId};
use genjobs_domain::job::{Job, Trigger, UpstreamRef};
use genjobs_domain::ports::*;
use genjobs_store_contract::cases::new_job;
use genjobs_store_postgres::connect;
use genjobs_test_postgres::TestDatabase;
use time::OffsetDateTime;

const JOBS: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_commits_of_two_replicas_over_the_same_jobs_never_deadlock() {
    let db = TestDatabase::new().await;
    let (first, second) = (connect(&db.settings()).unwrap(), connect(&db.settings()).unwrap());
    let store = first.store.clone();
    let now = OffsetDateTime::now_utc;
    let user = UserId::new_at(now());
    let limits = Limits { rate_limit_per_minute: 1000, max_concurrent_jobs: 1000 };
    let key = ApiKey::generate();
    store.create_user(user, "u".into(), Credits::new(1000), limits, StoredKey::of(&key, user, now())).await.unwrap();
    let mut jobs = Vec::new();
    for _ in 0..JOBS {
        let Accepted::Created(job) = store.accept(new_job(user, 1, now()), None, None, now()).await.unwrap() else {
            panic!("accepted")
        };
        jobs.push(job);
    }
    let step = async |job: Job, trigger: Trigger| match store.commit(job.apply(trigger, now()).unwrap()).await {
        Ok(Commit::Applied(job)) => job,
        other => panic!("commit: {other:?}"),
    };
    let mut submitted = Vec::new();
    for job in jobs {
        let started = step(job, Trigger::SubmitStarted { next_poll_at: now() }).await;
        let upstream = UpstreamRef::new("test", started.id().to_string());
        submitted.push(step(started, Trigger::Submitted { upstream, next_poll_at: now(), billing: None }).await);
    }
    let until = std::time::Instant::now() + Duration::from_secs(2);

    // Every job is moved by one task on each replica; each task takes the stored job when the
    // other replica changed it first.
    let progress: Vec<_> = [first.store.clone(), second.store.clone()]
        .into_iter()
        .flat_map(|store| submitted.clone().into_iter().map(move |job| (store.clone(), job)))
        .map(|(store, mut job)| {
            tokio::spawn(async move {
                let (mut applied, mut stale) = (0u32, 0u32);
                while std::time::Instant::now() < until {
                    let trigger =
                        Trigger::UpstreamRunning { progress: ((applied + stale) % 99) as u8, next_poll_at: now() };
                    match store.commit(job.apply(trigger, now()).unwrap()).await {
                        Ok(Commit::Applied(next)) => (job, applied) = (next, applied + 1),
                        Ok(Commit::Stale(current)) => (job, stale) = (current, stale + 1),
                        other => panic!("a progress commit failed: {other:?}"),
                    }
                }
                (applied, stale)
            })
        })
        .collect();
    let counts: Vec<(u32, u32)> = join_all(progress).await.into_iter().map(Result::unwrap).collect();
    let (applied, stale) = counts.iter().fold((0, 0), |(a, s), (applied, stale)| (a + applied, s + stale));
    assert!(applied > 2 * JOBS as u32 && stale > 0, "the race ran: {applied} applied, {stale} stale");
}
