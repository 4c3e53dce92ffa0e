//! The database out of reach behind PgBouncer: the pooler accepts the store's connections and
//! queues their statements for minutes, so only the store's own deadline
//! (`GENJOBS_DB_STATEMENT_TIMEOUT_MS`) answers. Every unit of work must fail as unavailable (a
//! 503) within 5 s, and the store must work again by itself once the database is back.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, JobId, UserId};
use genjobs_domain::ports::{Accepted, AccountStore, JobStore, Limits, RateBucket, RateLimiter, StoreError, StoredKey};
use genjobs_store_postgres::connect;
use genjobs_test_postgres::TestDatabase;
use genjobs_test_wait::eventually;
use time::OffsetDateTime;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_database_unreachable_behind_pgbouncer_work_fails_within_5_s_and_recovers() {
    let (db, gate) = TestDatabase::pooled_behind_gate().await;
    let replica = connect(&db.settings()).unwrap();
    let (store, limiter) = (&replica.store, &replica.rate_limiter);
    let user_id = UserId::new_at(OffsetDateTime::now_utc());
    let key = ApiKey::generate();
    let limits = Limits { rate_limit_per_minute: 100_000, max_concurrent_jobs: 100 };
    let stored = StoredKey::of(&key, user_id, OffsetDateTime::now_utc());
    store.create_user(user_id, "u".into(), Credits::new(1000), limits, stored).await.unwrap();
    let new_job = move || genjobs_store_contract::cases::new_job(user_id, 1, OffsetDateTime::now_utc());
    let Accepted::Created(job) = store.accept(new_job(), None, None, OffsetDateTime::now_utc()).await.unwrap() else {
        panic!("accepted");
    };

    gate.close();
    let started = Instant::now();
    let unknown = store.job(JobId::new_at(OffsetDateTime::now_utc())).await;
    let first = started.elapsed();
    assert!(matches!(unknown, Err(StoreError::Unavailable(_))), "{unknown:?}");
    assert!(first < Duration::from_secs(5), "the first answer took {first:?}");

    // Everything a request does, many at once: each is answered, unavailable, in time.
    let started = Instant::now();
    let answers = join_all((0..20).map(|i| async move {
        let answer = match i % 4 {
            0 => store.account(user_id).await.map(|_| ()),
            1 => {
                store.accept(new_job(), None, None, OffsetDateTime::now_utc()).await.map(|_| ()).map_err(|e| match e {
                    genjobs_domain::ports::AcceptError::Store(e) => e,
                    other => StoreError::Internal(format!("{other:?}")),
                })
            }
            2 => limiter.acquire(RateBucket::user(UserId::new_at(OffsetDateTime::now_utc())), 60).await.map(|_| ()),
            _ => store.jobs_of(user_id, None, 10).await.map(|_| ()),
        };
        (answer, started.elapsed())
    }))
    .await;
    for (answer, took) in &answers {
        assert!(matches!(answer, Err(StoreError::Unavailable(_))), "{answer:?}");
        assert!(*took < Duration::from_secs(5), "an answer took {took:?}");
    }

    gate.open();
    let recovered = eventually(Duration::from_secs(30), async || {
        store.jobs_of(user_id, None, 10).await.is_ok_and(|jobs| jobs.iter().any(|j| j.id() == job.id()))
    })
    .await;
    assert!(recovered, "the store did not work again once the database was back");
    assert!(store.accept(new_job(), None, None, OffsetDateTime::now_utc()).await.is_ok());
}
