//! What only a real Postgres shows: constraints, races over several connections, notifications
//! and limits shared between processes, and outages. Run directly (`postgres.rs`) and through
//! PgBouncer in transaction mode (`postgres_pooled.rs`): each test's database comes from the
//! including file's `database()`, and `POOLED` says which it is.

mod batches;
mod ledger;
mod notifications;
mod outages;
mod rate_limits;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use diesel_async::RunQueryDsl;
use futures_util::StreamExt;
use futures_util::future::join_all;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, JobId, UserId};
use genjobs_domain::job::{Job, JobError, JobErrorCode, JobState, Trigger, UpstreamRef};
use genjobs_domain::keys::KeySettings;
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use genjobs_domain::ports::*;
use genjobs_store_postgres::{KeyCache, PgAdapters, PgRateLimiter, PgSettings, PgStore, connect, pool, relaxed_pool};
use genjobs_test_postgres::TestDatabase;
use genjobs_test_wait::eventually;
use time::OffsetDateTime;

/// A replica as the binary builds it, with a key cache long enough that only `NOTIFY` can
/// refresh it (the job cache is refreshed only by `NOTIFY` anyway).
fn replica(db: &TestDatabase) -> PgAdapters {
    let long = Duration::from_secs(60);
    connect(&PgSettings { key_cache_ttl: long, ..db.settings() }).unwrap()
}

async fn user(store: &PgStore, credits: u64, max_concurrent_jobs: u32) -> (UserId, ApiKey) {
    let id = UserId::new_at(OffsetDateTime::now_utc());
    let key = ApiKey::generate();
    let limits = Limits { rate_limit_per_minute: 1000, max_concurrent_jobs };
    store
        .create_user(id, "u".into(), Credits::new(credits), limits, StoredKey::of(&key, id, OffsetDateTime::now_utc()))
        .await
        .unwrap();
    (id, key)
}

fn new_job(user_id: UserId, held: u64) -> Job {
    genjobs_store_contract::cases::new_job(user_id, held, OffsetDateTime::now_utc())
}

fn submission() -> (Trigger, Trigger) {
    let now = OffsetDateTime::now_utc();
    let upstream = UpstreamRef::new("test", "r");
    (Trigger::SubmitStarted { next_poll_at: now }, Trigger::Submitted { upstream, next_poll_at: now, billing: None })
}

async fn advance(store: &PgStore, job: Job, trigger: Trigger) -> Option<Job> {
    match store.commit(job.apply(trigger, OffsetDateTime::now_utc()).ok()?).await.unwrap() {
        Commit::Applied(job) => Some(job),
        _ => None,
    }
}

fn success(actual: u64) -> Trigger {
    Trigger::Succeeded {
        outputs: vec![OutputItem {
            url: "https://x/y.png".into(),
            kind: OutputKind::Image,
            meta: OutputMeta::default(),
            copy: None,
        }],
        credits_actual: Credits::new(actual),
        reported_units: None,
    }
}

/// What every Postgres restart or failover does to pooled connections: the server ends them.
async fn terminate_every_session(db: &TestDatabase) {
    let mut admin =
        genjobs_store_postgres::open_connection(&db.url, Duration::from_secs(5), Duration::from_secs(5)).await.unwrap();
    diesel::sql_query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(&mut admin)
    .await
    .unwrap();
}
