//! What one replica tells the others: changed jobs, revoked keys, and the caches they keep fresh.

use super::*;

/// Waits until `listener` hears what `publisher` publishes: a replica's `LISTEN` connection
/// comes up a moment after the replica, and a notification sent before is lost.
async fn hears(listener: &PgAdapters, publisher: &PgAdapters) {
    let probe = JobId::new_at(OffsetDateTime::now_utc());
    let mut heard = listener.events.subscribe(probe);
    let heard_once = async || {
        publisher.events.publish(probe).await;
        tokio::time::timeout(Duration::from_millis(200), heard.next()).await.is_ok()
    };
    assert!(eventually(Duration::from_secs(30), heard_once).await, "the notifications never reached the other replica");
}

#[tokio::test]
async fn a_change_published_on_one_replica_wakes_a_waiter_on_the_other() {
    let db = crate::database().await;
    let (a, b) = (replica(&db), replica(&db));
    hears(&b, &a).await;
    let job = JobId::new_at(OffsetDateTime::now_utc());
    let mut on_b = b.events.subscribe(job);
    let started = std::time::Instant::now();
    a.events.publish(job).await;
    let woke = tokio::time::timeout(Duration::from_secs(5), on_b.next()).await;
    assert_eq!(woke, Ok(Some(())));
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_revoked_key_stops_working_on_every_replica_at_once() {
    let db = crate::database().await;
    let (a, b) = (replica(&db), replica(&db));
    hears(&b, &a).await;
    let (_, key) = user(&a.store, 1, 1).await;
    assert_eq!(b.store.credentials(&key.prefix()).await.unwrap().len(), 1, "now cached on b for a minute");
    assert!(a.store.revoke_key(&key.prefix()).await.unwrap());
    let gone =
        eventually(Duration::from_secs(3), async || b.store.credentials(&key.prefix()).await.unwrap().is_empty()).await;
    assert!(gone, "b still accepts a revoked key");
    b.keys.clear();
}

/// A prefix no key has is cached too, so that a flood of one made-up key costs one query: a key
/// created behind the cache's back (on another replica, which announces no creation) is not
/// seen until the entry is forgotten.
#[tokio::test]
async fn a_prefix_no_key_has_is_cached() {
    let db = crate::database().await;
    let (a, b) = (replica(&db), replica(&db));
    // A look-up begun before the listener is up keeps nothing (it may miss an announcement).
    hears(&a, &b).await;
    let key = ApiKey::generate();
    assert!(a.store.credentials(&key.prefix()).await.unwrap().is_empty());
    let id = UserId::new_at(OffsetDateTime::now_utc());
    let limits = Limits { rate_limit_per_minute: 1, max_concurrent_jobs: 1 };
    let stored = StoredKey::of(&key, id, OffsetDateTime::now_utc());
    b.store.create_user(id, "late".into(), Credits::new(1), limits, stored).await.unwrap();
    assert!(a.store.credentials(&key.prefix()).await.unwrap().is_empty(), "the miss was cached");
    a.keys.forget(&key.prefix());
    assert_eq!(a.store.credentials(&key.prefix()).await.unwrap().len(), 1);
}

/// While its listener hears every announcement, a replica trusts a key it found past the key
/// cache's time-to-live, so that a steady client's requests cost no look-up: a change made
/// behind the listeners' backs (no `NOTIFY`) is not seen, an announced one is at once.
#[tokio::test]
async fn a_key_found_stays_cached_until_a_change_of_it_is_announced() {
    let db = crate::database().await;
    let short = connect(&PgSettings { key_cache_ttl: Duration::from_millis(100), ..db.settings() }).unwrap();
    let other = replica(&db);
    hears(&short, &other).await;
    let (_, key) = user(&other.store, 1, 1).await;
    let prefix = key.prefix();
    assert_eq!(short.store.credentials(&prefix).await.unwrap().len(), 1);
    let mut conn = other.store.pool().get().await.unwrap();
    diesel::sql_query(format!("UPDATE api_keys SET revoked_at = now() WHERE prefix = '{prefix}'"))
        .execute(&mut conn)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(short.store.credentials(&prefix).await.unwrap().len(), 1, "still trusted past the ttl: not looked up");
    assert!(other.store.set_key_settings(&prefix, KeySettings::default()).await.unwrap(), "an announced change");
    let gone =
        eventually(Duration::from_secs(3), async || short.store.credentials(&prefix).await.unwrap().is_empty()).await;
    assert!(gone, "the announcement did not drop the cached key");
}

#[tokio::test]
async fn a_job_cached_on_one_replica_is_evicted_when_another_changes_its_state() {
    let db = crate::database().await;
    let (a, b) = (replica(&db), replica(&db));
    hears(&b, &a).await;
    let (id, _) = user(&a.store, 50, 4).await;
    let Accepted::Created(job) = a.store.accept(new_job(id, 10), None, None, OffsetDateTime::now_utc()).await.unwrap()
    else {
        panic!()
    };
    assert_eq!(b.store.job(job.id()).await.unwrap().unwrap().state(), JobState::Queued, "now cached on b for a minute");
    advance(&a.store, job.clone(), Trigger::Cancel).await.unwrap();
    a.events.publish(job.id()).await;
    let seen = eventually(Duration::from_secs(3), async || {
        b.store.job(job.id()).await.unwrap().is_some_and(|j| j.state() == JobState::Canceled)
    })
    .await;
    assert!(seen, "b kept serving the stale job");
}

/// `job` sent and running at 10 %, committed on `store`.
async fn running(store: &PgStore, job: Job) -> Job {
    let (start, sent) = submission();
    let job = advance(store, advance(store, job, start).await.unwrap(), sent).await.unwrap();
    advance(store, job, Trigger::UpstreamRunning { progress: 10, next_poll_at: OffsetDateTime::now_utc() })
        .await
        .unwrap()
}

/// A change that is not a new state (progress) is announced by the store itself, so that a job
/// cached on another replica shows it within the long-poll's re-read interval.
#[tokio::test]
async fn a_cached_job_shows_progress_made_on_another_replica_within_the_poll_interval() {
    let db = crate::database().await;
    let (a, b) = (replica(&db), replica(&db));
    hears(&a, &b).await;
    let (id, _) = user(&a.store, 50, 4).await;
    let Accepted::Created(job) = b.store.accept(new_job(id, 10), None, None, OffsetDateTime::now_utc()).await.unwrap()
    else {
        panic!()
    };
    let job = running(&b.store, job).await;
    assert_eq!(a.store.job(job.id()).await.unwrap().unwrap().progress(), 10, "now cached on a");
    let further = Trigger::UpstreamRunning { progress: 40, next_poll_at: OffsetDateTime::now_utc() };
    let changed = job.apply(further, OffsetDateTime::now_utc()).unwrap();
    assert!(!changed.changes_state(), "the change announced by the store, not by the use case");
    assert!(matches!(b.store.commit(changed).await.unwrap(), Commit::Applied(_)));
    let seen = eventually(Duration::from_secs(2), async || {
        a.store.job(job.id()).await.unwrap().is_some_and(|j| j.progress() == 40)
    })
    .await;
    assert!(seen, "a kept serving the progress it had cached");
}

/// The cache serves kept jobs with no query, so a row changed behind its back (here by SQL,
/// announcing nothing) stays as kept while the listener hears; once the listener's connection
/// is lost, whatever it may have missed is read afresh, before and after it reconnects.
#[tokio::test]
async fn a_read_after_the_listener_lost_its_connection_is_fresh() {
    let db = crate::database().await;
    let a = replica(&db);
    assert!(eventually(Duration::from_secs(10), async || a.jobs.is_serving()).await, "the listener never listened");
    let (id, _) = user(&a.store, 50, 4).await;
    let Accepted::Created(job) = a.store.accept(new_job(id, 10), None, None, OffsetDateTime::now_utc()).await.unwrap()
    else {
        panic!()
    };
    let job = running(&a.store, job).await;
    assert_eq!(a.store.job(job.id()).await.unwrap().unwrap().progress(), 10);
    let mut admin =
        genjobs_store_postgres::open_connection(&db.url, Duration::from_secs(5), Duration::from_secs(5)).await.unwrap();
    let set_progress = |progress: i16| {
        diesel::sql_query("UPDATE jobs SET progress = $1, version = version + 1 WHERE id = $2")
            .bind::<diesel::sql_types::SmallInt, _>(progress)
            .bind::<diesel::sql_types::Uuid, _>(job.id().as_uuid())
    };
    set_progress(20).execute(&mut admin).await.unwrap();
    assert_eq!(a.store.job(job.id()).await.unwrap().unwrap().progress(), 10, "served from memory, with no query");

    terminate_every_session(&db).await;
    assert!(eventually(Duration::from_secs(5), async || !a.jobs.is_serving()).await, "the loss went unnoticed");
    let mut admin =
        genjobs_store_postgres::open_connection(&db.url, Duration::from_secs(5), Duration::from_secs(5)).await.unwrap();
    set_progress(30).execute(&mut admin).await.unwrap();
    // The pool's connections were ended too: through PgBouncer the first reads may be
    // unavailable; the first one that answers must be fresh.
    let mut first = None;
    assert!(
        eventually(Duration::from_secs(5), async || {
            first = a.store.job(job.id()).await.ok().flatten().map(|j| j.progress());
            first.is_some()
        })
        .await
    );
    assert_eq!(first, Some(30), "the job kept before the loss was served");
    assert!(eventually(Duration::from_secs(10), async || a.jobs.is_serving()).await, "the listener never came back");
    assert_eq!(a.store.job(job.id()).await.unwrap().unwrap().progress(), 30, "a stale job served after reconnecting");
}
