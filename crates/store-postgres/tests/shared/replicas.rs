//! What only a real Postgres shows: constraints, races over several connections, notifications
//! and limits shared between processes, and outages. Run directly (`postgres.rs`) and through
//! PgBouncer in transaction mode (`postgres_pooled.rs`): each test's database comes from the
//! including file's `database()`, and `POOLED` says which it is.

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
    (Trigger::SubmitStarted { next_poll_at: now }, Trigger::Submitted { upstream, next_poll_at: now })
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
    }
}

/// Many tasks over several pooled connections of two "replicas" race accepts, cancels and
/// completions: the limit holds, each job moves its credits once, and the ledger agrees with the
/// account row.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_replicas_keep_the_ledger_exact() {
    let db = crate::database().await;
    let (a, b) = (replica(&db), replica(&db));
    let (id, _) = user(&a.store, 500, 6).await;
    let stores = [a.store.clone(), b.store.clone()];
    let tasks = (0..80).map(|i| {
        let store = stores[i % 2].clone();
        let other = stores[(i + 1) % 2].clone();
        tokio::spawn(async move {
            let job = match store.accept(new_job(id, 9), None, None, OffsetDateTime::now_utc()).await {
                Ok(Accepted::Created(job)) => job,
                Err(AcceptError::ConcurrencyLimit { .. } | AcceptError::InsufficientCredits { .. }) => return,
                other => panic!("{other:?}"),
            };
            let active = store.account(id).await.unwrap().unwrap().active_jobs;
            assert!(active <= 6, "limit exceeded: {active}");
            let (start, sent) = submission();
            let job = advance(&store, job, start).await.unwrap();
            let job = advance(&store, job, sent).await.unwrap();
            let finish = if i % 3 == 0 {
                success(5)
            } else {
                Trigger::Failed { error: JobError::new(JobErrorCode::UpstreamFailed, "x") }
            };
            let (left, right) = (
                job.apply(finish, OffsetDateTime::now_utc()).unwrap(),
                job.apply(Trigger::Cancel, OffsetDateTime::now_utc()).unwrap(),
            );
            let outcomes = join_all([store.commit(left), other.commit(right)]).await;
            let applied = outcomes.iter().filter(|o| matches!(o, Ok(Commit::Applied(_)))).count();
            assert_eq!(applied, 1, "exactly one final transition: {outcomes:?}");
        })
    });
    for task in join_all(tasks).await {
        task.unwrap();
    }
    let account = a.store.account(id).await.unwrap().unwrap();
    assert_eq!((account.active_jobs, account.balances.held), (0, Credits::ZERO));
    assert_eq!(account.balances.total(), 500);
    let totals = a.store.ledger_totals(id).await.unwrap();
    assert_eq!(totals.granted, 500);
    assert_eq!(totals.granted - totals.held + totals.released, account.balances.available.get() as i64);
    assert_eq!(totals.spent, account.balances.spent.get() as i64);
    assert_eq!(totals.held, totals.spent + totals.released, "everything held was settled or released");
}

#[tokio::test]
async fn the_database_refuses_a_second_final_movement_and_negative_balances() {
    let db = crate::database().await;
    let r = replica(&db);
    let (id, _) = user(&r.store, 50, 4).await;
    let Accepted::Created(job) = r.store.accept(new_job(id, 10), None, None, OffsetDateTime::now_utc()).await.unwrap()
    else {
        panic!()
    };
    advance(&r.store, job.clone(), Trigger::Cancel).await.unwrap();
    let mut conn = r.store.pool().get().await.unwrap();
    let second = diesel::sql_query(format!(
        "INSERT INTO ledger (user_id, job_id, kind, amount, released) VALUES ('{}', '{}', 'settle', 10, 0)",
        id,
        job.id()
    ))
    .execute(&mut conn)
    .await;
    assert!(second.is_err(), "one final movement per job");
    let negative = diesel::sql_query(format!(
        "UPDATE users SET credits_available = -1, credits_granted = credits_granted - 51 WHERE id = '{id}'"
    ))
    .execute(&mut conn)
    .await;
    assert!(negative.is_err(), "balances are never negative");
    let unbalanced =
        diesel::sql_query(format!("UPDATE users SET credits_available = credits_available + 1 WHERE id = '{id}'"))
            .execute(&mut conn)
            .await;
    assert!(unbalanced.is_err(), "available + held + spent equals the grants");
}

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

/// A user and two rate limiters on one database, as two replicas have.
async fn two_limiters(db: &TestDatabase) -> (UserId, [PgRateLimiter; 2]) {
    let (id, _) = user(&replica(db).store, 1, 1).await;
    let settings = db.settings();
    let limiter = || PgRateLimiter::new(pool(&settings).unwrap()).with_pooler(settings.pooler);
    (id, [limiter(), limiter()])
}

#[tokio::test]
async fn two_replicas_share_one_rate_limit() {
    let db = crate::database().await;
    let (id, limiters) = two_limiters(&db).await;
    let mut allowed = 0;
    let mut retry_after = Duration::ZERO;
    for i in 0..12 {
        match limiters[i % 2].acquire(RateBucket::user(id), 5).await.unwrap() {
            RateDecision::Allowed => allowed += 1,
            RateDecision::Limited { retry_after: r } => retry_after = r,
        }
    }
    assert_eq!(allowed, 5);
    assert!(retry_after > Duration::from_secs(5) && retry_after <= Duration::from_secs(12), "{retry_after:?}");
}

/// A lease lives a minute, but one taken under another limit is not spent: a lowered limit
/// holds at the next request.
#[tokio::test]
async fn a_new_limit_drops_the_lease_taken_under_the_old_one() {
    let db = crate::database().await;
    let (id, [limiter, _]) = two_limiters(&db).await;
    let bucket = RateBucket::user(id);
    assert_eq!(limiter.acquire(bucket, 1200).await.unwrap(), RateDecision::Allowed, "a lease of 60 tokens");
    assert_eq!(
        limiter.acquire(bucket, 1).await.unwrap(),
        RateDecision::Allowed,
        "the bucket holds one at the new limit"
    );
    assert!(
        matches!(limiter.acquire(bucket, 1).await.unwrap(), RateDecision::Limited { .. }),
        "the old lease's 59 tokens were not spent under the new limit"
    );
}

#[tokio::test]
async fn an_unreachable_database_is_unavailable_not_internal() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("postgres://postgres@{}/nowhere", closed.local_addr().unwrap());
    drop(closed);
    let settings = PgSettings {
        pool_timeout: Duration::from_millis(500),
        connect_timeout: Duration::from_millis(500),
        ..PgSettings::new(url)
    };
    let store = PgStore::new(pool(&settings).unwrap(), Arc::new(KeyCache::new(Duration::from_secs(1))));
    assert!(matches!(store.job(JobId::new_at(OffsetDateTime::now_utc())).await, Err(StoreError::Unavailable(_))));
    let refused = store
        .accept(new_job(UserId::new_at(OffsetDateTime::now_utc()), 1), None, None, OffsetDateTime::now_utc())
        .await;
    assert!(matches!(refused, Err(AcceptError::Store(StoreError::Unavailable(_)))));
}

#[tokio::test]
async fn migrations_are_idempotent() {
    let db = crate::database().await;
    assert_eq!(genjobs_store_postgres::run_migrations(&db.settings()).await.unwrap(), 0);
}

/// A TCP proxy to the test server that can drop every connection and refuse new ones, to play a
/// database outage without stopping the shared server.
struct FlakyProxy {
    port: u16,
    down: Arc<AtomicBool>,
    /// Sent to at each outage: every connection open then is dropped.
    cut: tokio::sync::watch::Sender<()>,
}

impl FlakyProxy {
    async fn start(target: String) -> FlakyProxy {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let down = Arc::new(AtomicBool::new(false));
        let cut = tokio::sync::watch::Sender::new(());
        let (down_flag, cuts) = (Arc::clone(&down), cut.clone());
        tokio::spawn(async move {
            loop {
                let (mut client, _) = listener.accept().await.unwrap();
                if AtomicBool::load(&down_flag, Ordering::SeqCst) {
                    continue;
                }
                let (target, mut cut) = (target.clone(), cuts.subscribe());
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        FlakyProxy { port, down, cut }
    }

    fn outage(&self) {
        self.down.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cut.send_replace(());
    }

    fn recover(&self) {
        self.down.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_is_unavailable_and_the_store_recovers_by_itself() {
    let db = crate::database().await;
    let server = db.url.split('@').nth(1).unwrap().split('/').next().unwrap().to_owned();
    let proxy = FlakyProxy::start(server.clone()).await;
    let proxied = db.url.replace(&server, &format!("127.0.0.1:{}", proxy.port));
    let settings = PgSettings {
        pool_timeout: Duration::from_millis(500),
        connect_timeout: Duration::from_millis(500),
        ..PgSettings::new(proxied)
    };
    let store = PgStore::new(pool(&settings).unwrap(), Arc::new(KeyCache::new(Duration::ZERO)));
    let probe = JobId::new_at(OffsetDateTime::now_utc());
    assert_eq!(store.job(probe).await, Ok(None));

    proxy.outage();
    let cut = eventually(Duration::from_secs(30), async || is_unavailable(&store.job(probe).await)).await;
    assert!(cut, "the store never saw the outage");
    for _ in 0..3 {
        let during = store.job(probe).await;
        assert!(matches!(during, Err(StoreError::Unavailable(_))), "{during:?}");
    }

    proxy.recover();
    let back = eventually(Duration::from_secs(5), async || store.job(probe).await == Ok(None)).await;
    assert!(back, "the store did not recover");
}

#[tokio::test]
async fn leased_tokens_never_let_two_replicas_past_the_limit_together() {
    let db = crate::database().await;
    let (id, limiters) = two_limiters(&db).await;
    let mut allowed = 0;
    let started = std::time::Instant::now();
    for i in 0..300 {
        if limiters[i % 2].acquire(RateBucket::user(id), 120).await.unwrap() == RateDecision::Allowed {
            allowed += 1;
        }
    }
    // The bucket refills at 2 tokens a second while the loop runs; on a loaded machine it runs
    // long enough for that to count.
    let refilled = (started.elapsed().as_secs_f64() * 2.0).ceil() as usize;
    assert!(allowed <= 120 + refilled + 1, "past the limit: {allowed} (refilled {refilled})");
    assert!(allowed >= 120 - 2 * 6, "leases lost too much: {allowed}");
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

#[tokio::test]
async fn recomputable_and_durable_commits_both_apply() {
    let db = crate::database().await;
    let settings = db.settings();
    let store = PgStore::new(pool(&settings).unwrap(), Arc::new(KeyCache::new(Duration::ZERO)))
        .with_pooler(settings.pooler)
        .with_relaxed_writes(relaxed_pool(&settings).unwrap());
    let (id, _) = user(&store, 50, 4).await;
    let Accepted::Created(job) = store.accept(new_job(id, 10), None, None, OffsetDateTime::now_utc()).await.unwrap()
    else {
        panic!()
    };
    let (start, sent) = submission();
    let job = advance(&store, job, start).await.unwrap();
    let job = advance(&store, job, sent).await.unwrap();
    let running = Trigger::UpstreamRunning { progress: 30, next_poll_at: OffsetDateTime::now_utc() };
    let job = advance(&store, job, running).await.unwrap();
    assert_eq!(store.job(job.id()).await.unwrap().unwrap().progress(), 30);
    advance(&store, job, success(10)).await.unwrap();
    assert_eq!(store.account(id).await.unwrap().unwrap().balances.spent, Credits::new(10));
}

/// Commits that move no credits are written in groups: many at once all apply, and of two
/// transitions from the same version in one group only one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commits_keep_compare_and_set_per_job() {
    let db = crate::database().await;
    let r = replica(&db);
    let (id, _) = user(&r.store, 1000, 100).await;
    let mut jobs = Vec::new();
    for _ in 0..50 {
        let Accepted::Created(job) =
            r.store.accept(new_job(id, 1), None, None, OffsetDateTime::now_utc()).await.unwrap()
        else {
            panic!()
        };
        jobs.push(job);
    }
    let started = join_all(jobs.iter().map(|job| {
        let transition =
            job.apply(Trigger::SubmitStarted { next_poll_at: OffsetDateTime::now_utc() }, OffsetDateTime::now_utc());
        r.store.commit(transition.unwrap())
    }))
    .await;
    assert!(started.iter().all(|c| matches!(c, Ok(Commit::Applied(_)))), "{started:?}");

    let Ok(Commit::Applied(attempted)) = &started[0] else { panic!() };
    let twins = [1, 2].map(|s| {
        attempted
            .apply(
                Trigger::SubmitNotReached { next_poll_at: OffsetDateTime::now_utc() + time::Duration::seconds(s) },
                OffsetDateTime::now_utc(),
            )
            .unwrap()
    });
    let outcomes = join_all(twins.into_iter().map(|t| r.store.commit(t))).await;
    assert_eq!(outcomes.iter().filter(|o| matches!(o, Ok(Commit::Applied(_)))).count(), 1, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| matches!(o, Ok(Commit::Stale(_)))).count(), 1, "{outcomes:?}");
}

#[tokio::test]
async fn idempotency_records_older_than_the_retention_are_pruned() {
    let db = crate::database().await;
    let r = replica(&db);
    let (id, _) = user(&r.store, 100, 8).await;
    let now = OffsetDateTime::now_utc();
    let day = time::Duration::hours(24);
    let claim = |key: &str| Some(IdempotencyClaim { key: key.into(), fingerprint: "f".into() });
    r.store.accept(new_job(id, 1), claim("old"), None, now - day - time::Duration::minutes(1)).await.unwrap();
    r.store.accept(new_job(id, 1), claim("fresh"), None, now).await.unwrap();
    assert_eq!(r.store.prune_idempotency(now - day).await.unwrap(), 1);
    let replayed = r.store.accept(new_job(id, 1), claim("fresh"), None, now).await.unwrap();
    assert!(matches!(replayed, Accepted::Replayed(_)), "the fresh record is kept");
    let again = r.store.accept(new_job(id, 1), claim("old"), None, now).await.unwrap();
    assert!(matches!(again, Accepted::Created(_)), "the pruned key is free again");
}

fn is_unavailable<T>(result: &Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Unavailable(_)))
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

#[tokio::test]
async fn a_session_terminated_under_the_pool_is_never_an_internal_error() {
    let db = crate::database().await;
    let settings = PgSettings { pool_size: 2, job_cache_entries: 0, key_cache_ttl: Duration::ZERO, ..db.settings() };
    let r = connect(&settings).unwrap();
    let (id, key) = user(&r.store, 100, 8).await;
    let Accepted::Created(job) = r.store.accept(new_job(id, 1), None, None, OffsetDateTime::now_utc()).await.unwrap()
    else {
        panic!("accepted");
    };
    for _ in 0..20 {
        // Both pooled connections are in use once, then ended by the server at once, before
        // the pool can notice.
        let (a, b) = tokio::join!(r.store.job(job.id()), r.store.account(id));
        assert!(a.is_ok() && b.is_ok());
        terminate_every_session(&db).await;
        // Reads are safe to repeat: they are retried once on a fresh connection. Through
        // PgBouncer the fresh connection may still meet a server connection the pooler has not
        // yet found dead, and then the read is unavailable (503) too, never internal.
        let read = r.store.job(job.id()).await.map(|j| j.map(|j| j.id()));
        assert!(read == Ok(Some(job.id())) || crate::POOLED && is_unavailable(&read), "{read:?}");
        let keys = r.store.credentials(&key.prefix()).await.map(|c| c.len());
        assert!(keys == Ok(1) || crate::POOLED && is_unavailable(&keys), "{keys:?}");
        terminate_every_session(&db).await;
        // A write is not repeated blindly; it fails as unavailable (503), never as internal (500).
        match r.store.grant(id, 1).await {
            Ok(_) | Err(AccountError::Store(StoreError::Unavailable(_))) => {}
            other => panic!("a terminated session surfaced as {other:?}"),
        }
    }
}

#[tokio::test]
async fn readiness_needs_every_migration_of_this_build() {
    let db = crate::database().await;
    let r = replica(&db);
    assert_eq!(r.store.ready().await, Ok(()));
    let mut conn =
        genjobs_store_postgres::open_connection(&db.url, Duration::from_secs(5), Duration::from_secs(5)).await.unwrap();
    diesel::sql_query(
        "DELETE FROM __diesel_schema_migrations WHERE version = (SELECT max(version) FROM __diesel_schema_migrations)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    assert!(matches!(r.store.ready().await, Err(StoreError::Unavailable(_))), "a missing migration is not ready");
}
