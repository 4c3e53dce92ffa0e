//! Statements that lock several jobs lock them in one order (their ids), so that lease renewals
//! and group commits of the same jobs, running side by side on different connections, never
//! wait for each other: Postgres would abort one of them as a deadlock, and the driver would
//! let its jobs go until their leases ran out.

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
async fn renewals_and_group_commits_of_the_same_jobs_never_deadlock() {
    let db = TestDatabase::new().await;
    let adapters = connect(&db.settings()).unwrap();
    let store = adapters.store.clone();
    let now = OffsetDateTime::now_utc;
    let user = UserId::new_at(now());
    let limits = Limits { rate_limit_per_minute: 1000, max_concurrent_jobs: 1000 };
    let key = ApiKey::generate();
    store.create_user(user, "u".into(), Credits::new(1000), limits, StoredKey::of(&key, user, now())).await.unwrap();
    let lease = now() + Duration::from_secs(60);
    let mut jobs = Vec::new();
    for _ in 0..JOBS {
        let Accepted::Created(job) = store.accept(new_job(user, 1, now()), None, Some(lease), now()).await.unwrap()
        else {
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
        submitted.push(step(started, Trigger::Submitted { upstream, next_poll_at: now() }).await);
    }
    let ids: Vec<_> = submitted.iter().map(Job::id).collect();
    let until = std::time::Instant::now() + Duration::from_secs(2);

    let progress: Vec<_> = submitted
        .into_iter()
        .map(|mut job| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut commits = 0u32;
                while std::time::Instant::now() < until {
                    let trigger = Trigger::UpstreamRunning { progress: (commits % 99) as u8, next_poll_at: now() };
                    match store.commit(job.apply(trigger, now()).unwrap()).await {
                        Ok(Commit::Applied(next)) => job = next,
                        other => panic!("a progress commit failed: {other:?}"),
                    }
                    commits += 1;
                }
                commits
            })
        })
        .collect();
    let renewals: Vec<_> = (0..2)
        .map(|turn| {
            let (store, mut ids) = (store.clone(), ids.clone());
            tokio::spawn(async move {
                let mut renewals = 0u32;
                while std::time::Instant::now() < until {
                    // Each turn asks in another order; the rows must still be locked in one.
                    ids.rotate_left(7 + turn);
                    ids.reverse();
                    let renewed = store.renew_leases(ids.clone(), now(), now() + Duration::from_secs(60)).await;
                    assert_eq!(renewed.map(|r| r.len()).map_err(|e| e.to_string()), Ok(JOBS), "a renewal failed");
                    renewals += 1;
                }
                renewals
            })
        })
        .collect();
    let commits: u32 = join_all(progress).await.into_iter().map(Result::unwrap).sum();
    let renewed: u32 = join_all(renewals).await.into_iter().map(Result::unwrap).sum();
    assert!(commits > JOBS as u32 && renewed > 2, "the race ran: {commits} commits, {renewed} renewals");
}
