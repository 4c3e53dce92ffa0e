//! Outages, migrations and housekeeping: what the store says when the database is away, and
//! what it finds when it comes back.

use super::*;

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
