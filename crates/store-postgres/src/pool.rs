//! The connection pool (deadpool over diesel-async, as crates.io runs it) and the embedded
//! migrations.

use std::time::Duration;

use deadpool::Runtime;
use diesel::ConnectionError;
use diesel::connection::CacheSize;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use futures_util::FutureExt;

/// The migrations of `migrations/` at the top of the repository, built into the binary.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations");

/// What stands between `DATABASE_URL` and Postgres (`GENJOBS_DATABASE_POOLER`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pooler {
    /// Nothing, or a pooler that gives each client a server session of its own (`none`).
    #[default]
    None,
    /// A pooler in transaction mode, such as PgBouncer's `pool_mode = transaction`
    /// (`transaction`): a client keeps a server connection only for one transaction. So every
    /// unit of work is an explicit transaction, no statement stays prepared across them, and no
    /// setting is made for a session (it would stay on a server connection others then use).
    Transaction,
}

impl std::str::FromStr for Pooler {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "none" => Ok(Pooler::None),
            "transaction" => Ok(Pooler::Transaction),
            other => Err(format!("unknown pooler {other:?}: expected none or transaction")),
        }
    }
}

/// How the pool connects and how long it waits.
#[derive(Debug, Clone)]
pub struct PgSettings {
    /// `DATABASE_URL`.
    pub url: String,
    /// What stands between `url` and Postgres (`GENJOBS_DATABASE_POOLER`).
    pub pooler: Pooler,
    /// A direct connection to Postgres, for `LISTEN` and migrations, which need a session of
    /// their own (`GENJOBS_DATABASE_LISTEN_URL`; `url` when unset).
    pub listen_url: Option<String>,
    /// Connections kept at most (`GENJOBS_DB_POOL_SIZE`).
    pub pool_size: usize,
    /// How long a request waits for a free connection before answering 503
    /// (`GENJOBS_DB_POOL_TIMEOUT_MS`).
    pub pool_timeout: Duration,
    /// How long connecting may take (`GENJOBS_DB_CONNECT_TIMEOUT_MS`).
    pub connect_timeout: Duration,
    /// The deadline of every unit of work, from asking the pool for a connection to the end of
    /// its last statement, kept by the client so that it holds through a pooler that queues
    /// the work while the database is out of reach; also the `statement_timeout` of every
    /// direct connection (`GENJOBS_DB_STATEMENT_TIMEOUT_MS`).
    pub statement_timeout: Duration,
    /// How long a looked-up API key is trusted without asking the database again; revocations
    /// reach every replica at once through `NOTIFY`, this bounds a missed notification
    /// (`GENJOBS_KEY_CACHE_SECS`).
    pub key_cache_ttl: Duration,
    /// Jobs kept in memory at most, served with no query while the listener hears every
    /// change (`GENJOBS_JOB_CACHE_ENTRIES`; 0 turns the cache off).
    pub job_cache_entries: usize,
}

impl PgSettings {
    /// The defaults for `url`.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), ..Self::default() }
    }

    /// The URL of a session of its own: `listen_url`, else `url`.
    #[must_use]
    pub fn direct_url(&self) -> &str {
        self.listen_url.as_deref().unwrap_or(&self.url)
    }
}

impl Default for PgSettings {
    /// No URL yet; 16 connections, 2 s to get one, 5 s to connect, 3 s per unit of work, keys
    /// cached for 5 s, 20,000 jobs kept.
    fn default() -> Self {
        Self {
            url: String::new(),
            pooler: Pooler::None,
            listen_url: None,
            pool_size: 16,
            pool_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(3),
            key_cache_ttl: Duration::from_secs(5),
            job_cache_entries: 20_000,
        }
    }
}

/// A failure to set up the database.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The pool could not be built.
    #[error("cannot build the database pool: {0}")]
    Pool(String),
    /// Connecting failed.
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    /// A migration failed.
    #[error("cannot run the database migrations: {0}")]
    Migrate(String),
}

/// Opens one connection with `statement_timeout` set.
///
/// # Errors
/// When the database cannot be reached within `connect_timeout`.
pub async fn open_connection(
    url: &str,
    settings_statement_timeout: Duration,
    connect_timeout: Duration,
) -> Result<AsyncPgConnection, ConnectionError> {
    connect_with(url, settings_statement_timeout, connect_timeout, Durability::Durable, Pooler::None).await
}

/// Whether a connection's commits wait for the write-ahead log to reach disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every commit is on disk when it returns: the ledger, submissions, everything by default.
    Durable,
    /// `synchronous_commit = off`: a crash may lose the last few hundred milliseconds of commits,
    /// which is only allowed for writes the next poll recomputes (progress, next poll time).
    Relaxed,
}

/// Counts a commit that wrote jobs (accepts, transitions, leases) as
/// `genjobs_db_job_commits_total{durability}`: what a job costs the database, per job.
pub(crate) fn count_job_commit(durability: Durability) {
    let label = match durability {
        Durability::Durable => "durable",
        Durability::Relaxed => "relaxed",
    };
    metrics::counter!("genjobs_db_job_commits_total", "durability" => label).increment(1);
}

async fn connect_with(
    url: &str,
    settings_statement_timeout: Duration,
    connect_timeout: Duration,
    durability: Durability,
    pooler: Pooler,
) -> Result<AsyncPgConnection, ConnectionError> {
    let timed_out = |_| ConnectionError::BadConnection("timed out connecting to the database".into());
    if pooler == Pooler::Transaction {
        // A session setting would outlive this client on the server connection it landed on
        // (`synchronous_commit = off` under another client's ledger write), so none is made:
        // the statement timeout is then the role's or the pooler's to set.
        return tokio::time::timeout(connect_timeout, establish_through_pooler(url)).await.map_err(timed_out)?;
    }
    let establish = AsyncPgConnection::establish(url);
    let mut conn = tokio::time::timeout(connect_timeout, establish).await.map_err(timed_out)??;
    diesel::sql_query(format!("SET statement_timeout = {}", settings_statement_timeout.as_millis()))
        .execute(&mut conn)
        .await
        .map_err(ConnectionError::CouldntSetupConfiguration)?;
    if durability == Durability::Relaxed {
        diesel::sql_query("SET synchronous_commit = off")
            .execute(&mut conn)
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)?;
    }
    Ok(conn)
}

/// Connects through a transaction pooler. diesel-async's own set-up prepares two statements and
/// keeps them cached; outside a transaction the pooler may run them on different server
/// connections, and leave them behind on one where another client's statement of the same name
/// then fails. So the set-up runs inside a transaction opened beforehand, and the cache is turned
/// off before it commits: dropping the cached statements closes them on that same server
/// connection. From then on no statement outlives the transaction it was prepared in.
async fn establish_through_pooler(url: &str) -> Result<AsyncPgConnection, ConnectionError> {
    let refused = |e: tokio_postgres::Error| ConnectionError::BadConnection(e.to_string());
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.map_err(refused)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "a pooled database connection ended");
        }
    });
    client.batch_execute("BEGIN").await.map_err(refused)?;
    let mut conn = AsyncPgConnection::try_from(client).await?;
    conn.set_prepared_statement_cache_size(CacheSize::Disabled);
    conn.batch_execute("COMMIT").await.map_err(ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

/// Builds the pool of durable connections. Connections are made lazily, so this succeeds while
/// the database is down.
///
/// # Errors
/// [`SetupError::Pool`] for settings the pool refuses.
pub fn pool(settings: &PgSettings) -> Result<Pool<AsyncPgConnection>, SetupError> {
    pool_of(settings, Durability::Durable, settings.pool_size)
}

/// Builds a small pool of [`Durability::Relaxed`] connections, for recomputable writes.
///
/// # Errors
/// [`SetupError::Pool`] for settings the pool refuses.
pub fn relaxed_pool(settings: &PgSettings) -> Result<Pool<AsyncPgConnection>, SetupError> {
    pool_of(settings, Durability::Relaxed, (settings.pool_size / 4).max(2))
}

fn pool_of(settings: &PgSettings, durability: Durability, size: usize) -> Result<Pool<AsyncPgConnection>, SetupError> {
    let (statement_timeout, connect_timeout, pooler) =
        (settings.statement_timeout, settings.connect_timeout, settings.pooler);
    let mut config = ManagerConfig::default();
    config.custom_setup =
        Box::new(move |url| connect_with(url, statement_timeout, connect_timeout, durability, pooler).boxed());
    // A checked-out connection is not pinged first: a dead one fails its query, is dropped as
    // broken, and the request answers 503; the ping would cost a round trip on every request.
    config.recycling_method = RecyclingMethod::Fast;
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(&settings.url, config);
    Pool::builder(manager)
        .max_size(size)
        .wait_timeout(Some(settings.pool_timeout))
        .create_timeout(Some(settings.connect_timeout))
        .recycle_timeout(Some(settings.connect_timeout))
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| SetupError::Pool(e.to_string()))
}

/// How many of this build's migrations are missing from `applied` (the versions recorded in
/// `__diesel_schema_migrations`).
#[must_use]
pub fn pending_migrations(applied: &[String]) -> usize {
    // The migrations are built in; should they fail to list, none counts as applied.
    diesel::migration::MigrationSource::<diesel::pg::Pg>::migrations(&MIGRATIONS).map_or(usize::MAX, |embedded| {
        embedded.iter().filter(|m| !applied.iter().any(|a| *a == m.name().version().to_string())).count()
    })
}

/// Runs the pending migrations on a connection of its own, on [`PgSettings::direct_url`]: the
/// advisory lock that keeps two replicas from migrating together belongs to a session.
///
/// # Errors
/// [`SetupError::Connect`] or [`SetupError::Migrate`].
pub async fn run_migrations(settings: &PgSettings) -> Result<usize, SetupError> {
    let conn = open_connection(settings.direct_url(), Duration::from_secs(600), settings.connect_timeout)
        .await
        .map_err(|e| SetupError::Connect(e.to_string()))?;
    let mut wrapper: AsyncConnectionWrapper<AsyncPgConnection> = AsyncConnectionWrapper::from(conn);
    tokio::task::spawn_blocking(move || {
        // Two replicas starting together must not run the same migration twice.
        let lock = |sql: &str, conn: &mut AsyncConnectionWrapper<AsyncPgConnection>| {
            diesel::RunQueryDsl::execute(diesel::sql_query(sql), conn).map_err(|e| e.to_string())
        };
        lock("SELECT pg_advisory_lock(7423001)", &mut wrapper)?;
        let applied = wrapper.run_pending_migrations(MIGRATIONS).map(|v| v.len()).map_err(|e| e.to_string());
        lock("SELECT pg_advisory_unlock(7423001)", &mut wrapper)?;
        applied
    })
    .await
    .map_err(|e| SetupError::Migrate(e.to_string()))?
    .map_err(SetupError::Migrate)
}
