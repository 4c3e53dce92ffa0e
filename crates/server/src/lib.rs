//! # genjobs
//!
//! The binary's library half: [`start`] reads a [`Config`], builds the adapters, and starts the
//! HTTP server and the job driver. `main.rs` only parses the command line and prints what an
//! operator needs; the integration tests call [`start`] on port 0.
//!
//! With no environment, genjobs runs on the embedded default: the in-memory store and the fal
//! queue simulator, started in process on a loopback port and reached through the real fal
//! adapter over HTTP (the `sim` feature, on by default; without it `GENJOBS_UPSTREAM_URL` is
//! required). With `DATABASE_URL`, it runs on Postgres, and several processes may serve
//! one database together.

pub mod cli;
mod cli_error;
mod config;
pub mod config_table;
mod connection;
pub mod keys_cli;
pub mod logs;
pub mod remote;
mod secrets;
mod simulator;
pub mod traces;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::dev::Server;
use genjobs_client_webhooks::{HttpWebhookTransport, SealedSecrets};
use genjobs_domain::capacity::{self, CapacitySettingError};
use genjobs_domain::catalog::{Catalog, CatalogFile, LiveCatalog, ModelDocument};
use genjobs_domain::ports::{
    AccountStore, BatchStore, CatalogStore, JobEvents, JobRemovals, JobStore, KeptSecrets, NoTraces, OpenAiBatchStore,
    OutputStore, ProviderSlots, RandomIds, RateLimiter, UploadStore, UpstreamProvider, UsageStore, WebhookStore,
};
use genjobs_domain::usecases::{
    Admin, AdminPorts, ClientWebhookPorts, Moderator, NewUserRequest, Ports, Services, WebhookDeliveries,
};
use genjobs_driver::{
    BatchWindows, CatalogFollower, JobDriver, Loops, RetentionSweep, RunningLoops, UploadSweep, UsageSealing,
    WebhookDispatcher,
};
use genjobs_http::dto::client_webhooks::WebhookBodies;
use genjobs_http::{AppState, Drain};
use genjobs_moderation_openai::OpenAiModeration;
use genjobs_output_store::{HttpOutputSource, ObjectOutputStore, OutputHosts};
use genjobs_runtime::{
    EventHub, MeteredUpstream, OtelTraces, REFUSED_RETRY_PAUSE, RetriedCopies, RoutedUpstream, SystemClock,
    TokenBucketLimiter,
};
use genjobs_store_memory::MemoryStore;
use genjobs_store_postgres::{PgAdapters, SetupError};
use genjobs_upstream_fal::routes::FalSchemas;
use genjobs_upstream_fal::{FAL_JWKS_URL, FalConfig, FalUpstream, WebhookConfig};
use genjobs_upstream_replicate::{ReplicateSchemas, ReplicateUpstream};
use simulator::RunningSim;

pub use config::{Config, ConfigArgs, LogFormat};

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The initial model catalog cannot be read or is inconsistent.
    #[error("model catalog {path}: {problem}")]
    Catalog {
        /// Where it was read from.
        path: String,
        /// What is wrong, and where in the file.
        problem: String,
    },
    /// The catalog file cannot be read.
    #[error("cannot read the model catalog {path}: {source}")]
    CatalogFile {
        /// Where it was read from.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The operator's fal endpoint schemas cannot be read.
    #[error("fal endpoint schemas {path}: {problem}")]
    FalSchemas {
        /// Where they were read from.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The database cannot be set up.
    #[error(transparent)]
    Database(#[from] SetupError),
    /// The listen address cannot be bound.
    #[error("cannot listen: {0}")]
    Bind(#[from] std::io::Error),
    /// The built-in simulator's port cannot be bound: another process (another genjobs on the
    /// same host, say) holds it.
    #[cfg(feature = "sim")]
    #[error(
        "the built-in simulator cannot listen on 127.0.0.1:{port}: {source}; set GENJOBS_SIM_PORT (--sim-port) to a free port, or to 0 for any free port (which changes at every start)"
    )]
    SimulatorPort {
        /// The port asked for.
        port: u16,
        /// Why it cannot be bound.
        source: std::io::Error,
    },
    /// The upstream HTTP client cannot be built.
    #[error(transparent)]
    Upstream(#[from] genjobs_upstream_fal::BuildError),
    /// Replicate's adapter cannot be built (its HTTP client, or a webhook secret not in `whsec_` form).
    #[error("Replicate: {0}")]
    Replicate(#[from] genjobs_upstream_replicate::BuildError),
    /// A provider's keys or cap of jobs in flight per key are set wrong.
    #[error(transparent)]
    Capacity(#[from] CapacitySettingError),
    /// The moderation service is set wrong: `GENJOBS_MODERATION_URL=sim` without the built-in
    /// simulator, or its HTTP client cannot be built.
    #[error("GENJOBS_MODERATION_URL: {0}")]
    Moderation(String),
    /// The client webhooks' HTTP client cannot be built.
    #[error("cannot build the client webhooks' HTTP client: {0}")]
    ClientWebhooks(String),
    /// The output store cannot be opened.
    #[error(transparent)]
    OutputStore(#[from] genjobs_output_store::OpenError),
    /// No provider is configured, and this build has no simulator to stand in.
    #[cfg(not(feature = "sim"))]
    #[error(
        "GENJOBS_UPSTREAM_URL (--upstream-url) is not set, and this build has no built-in simulator (cargo feature `sim`) to serve in its place"
    )]
    NoUpstream,
    /// The demo user cannot be created.
    #[error("cannot create the demo user: {0}")]
    Demo(String),
    /// A configured admin token or link secret is too short to resist guessing.
    #[error(
        "{variable} ({flag}) is {length} characters long; it must be at least {min} (`openssl rand -hex 32` makes one)",
        min = secrets::MIN_SECRET_CHARS
    )]
    ShortSecret {
        /// The setting's variable.
        variable: &'static str,
        /// The setting's flag.
        flag: &'static str,
        /// How long the configured value is.
        length: usize,
    },
    /// The store cannot keep or give the service's generated keys.
    #[error("cannot read or keep the service's keys in the store: {0}")]
    KeptSecrets(#[from] genjobs_domain::ports::StoreError),
}

/// A started service.
pub struct Service {
    /// Where it listens.
    pub address: SocketAddr,
    /// The admin token, when this start generated it (to show once): `None` when it is
    /// configured, or was generated by an earlier start over the same store.
    pub admin_token: Option<String>,
    /// The demo user's key, with the in-memory store.
    pub demo_key: Option<String>,
    /// The built-in simulator's base URL, when it runs.
    pub simulator_url: Option<String>,
    server: Server,
    drain: Drain,
    loops: RunningLoops,
    postgres: Option<PgAdapters>,
    simulator: Option<RunningSim>,
}

/// How often each process reads the catalog store again, in case it missed an announcement
/// of a change (Postgres announces each within milliseconds).
pub const CATALOG_RELOAD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

impl Service {
    /// Starting this drains the service as SIGTERM does.
    #[must_use]
    pub fn drain(&self) -> Drain {
        self.drain.clone()
    }

    /// Serves until SIGTERM or SIGINT (or [`Service::drain`]), then drains in order: stop
    /// accepting connections and end open streams and long-polls (clients reconnect elsewhere),
    /// let the driver end the provider calls it has started and hand its jobs back to the other
    /// replicas and the webhook dispatcher end its deliveries, then let the requests in flight
    /// finish within the shutdown timeout, and stop.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn run(self) -> std::io::Result<()> {
        let (drain, handle) = (self.drain.clone(), self.server.handle());
        let loops = self.loops;
        let background = async {
            tokio::select! {
                () = drain.started() => {}
                () = termination() => drain.start(),
            }
            tracing::info!("draining: no new connections; streams and long-polls end now");
            handle.pause().await;
            // The HTTP workers stop last: a pooled connection runs on the runtime that made it,
            // often a worker's, and would close under the driver's and the dispatcher's last
            // commits (a submission recorded seconds later, notifications lost).
            loops.drained().await;
            handle.stop(true).await;
        };
        let serving = async {
            let served = self.server.await;
            self.drain.start();
            served
        };
        let (served, ()) = tokio::join!(serving, background);
        drop(self.postgres);
        if let Some(sim) = &self.simulator {
            sim.stop().await;
        }
        served
    }
}

/// SIGTERM (what orchestrators send) or SIGINT (Ctrl-C).
async fn termination() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// The documents an empty catalog store is filled with: the built-in catalog, or the file of
/// `GENJOBS_MODELS`.
fn initial_documents(config: &Config) -> Result<Vec<ModelDocument>, StartError> {
    match &config.models_path {
        None => Catalog::builtin_documents()
            .map_err(|e| StartError::Catalog { path: "built-in".into(), problem: e.to_string() }),
        Some(path) => {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|source| StartError::CatalogFile { path: shown.clone(), source })?;
            let file =
                CatalogFile::read(&text).map_err(|e| StartError::Catalog { path: shown, problem: e.to_string() })?;
            Ok(file.models)
        }
    }
}

/// Adds the operator's fal endpoint schemas of `GENJOBS_FAL_SCHEMAS` to those shipped.
fn add_fal_schemas(config: &Config) -> Result<(), StartError> {
    let Some(path) = &config.fal_schemas_path else { return Ok(()) };
    let shown = path.display().to_string();
    let failed = |problem: String| StartError::FalSchemas { path: shown.clone(), problem };
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    let file = genjobs_upstream_fal::schema::read_endpoints_file(&text).map_err(failed)?;
    genjobs_upstream_fal::schema::add_operator_endpoints(file).map_err(failed)
}

/// What the configured store gives: the operators' ports, change notifications, the rate limit,
/// the webhook outbox, and (for Postgres) the adapters whose tasks serve them in the background.
struct StorePorts {
    admin: AdminPorts,
    kept: Arc<dyn KeptSecrets>,
    uploads: Arc<dyn UploadStore>,
    events: Arc<dyn JobEvents>,
    rate_limiter: Arc<dyn RateLimiter>,
    outbox: Arc<dyn WebhookStore>,
    removals: Arc<dyn JobRemovals>,
    batches: Arc<dyn BatchStore>,
    openai_batches: Arc<dyn OpenAiBatchStore>,
    slots: Arc<dyn ProviderSlots>,
    postgres: Option<PgAdapters>,
}

/// The operators' ports over one store that keeps jobs, accounts, usage and the catalog.
fn admin_ports<S: JobStore + AccountStore + UsageStore + CatalogStore + 'static>(store: Arc<S>) -> AdminPorts {
    AdminPorts {
        jobs: store.clone(),
        accounts: store.clone(),
        usage: store.clone(),
        catalog: store,
        route_schemas: route_schemas(),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
    }
}

/// The ports of the configured store, with no provider: all the command line's administration
/// needs, and the base of [`ports`].
async fn store_ports(config: &Config) -> Result<StorePorts, StartError> {
    let Some(pg) = config.postgres_settings() else {
        let store = Arc::new(MemoryStore::new());
        return Ok(StorePorts {
            admin: admin_ports(store.clone()),
            kept: store.clone(),
            uploads: store.clone(),
            events: Arc::new(EventHub::new()),
            rate_limiter: Arc::new(TokenBucketLimiter::new()),
            outbox: store.clone(),
            removals: store.clone(),
            batches: store.clone(),
            openai_batches: store.clone(),
            slots: store,
            postgres: None,
        });
    };
    let applied = genjobs_store_postgres::run_migrations(&pg).await?;
    tracing::info!(applied, "database migrations are up to date");
    let adapters = genjobs_store_postgres::connect(&pg)?;
    Ok(StorePorts {
        admin: admin_ports(adapters.store.clone()),
        kept: adapters.store.clone(),
        uploads: adapters.store.clone(),
        events: adapters.events.clone(),
        rate_limiter: adapters.rate_limiter.clone(),
        outbox: adapters.store.clone(),
        removals: adapters.store.clone(),
        batches: adapters.store.clone(),
        openai_batches: adapters.store.clone(),
        slots: adapters.store.clone(),
        postgres: Some(adapters),
    })
}

/// The ports of the configured store and `upstream`, with the store's webhook outbox and kept
/// secrets, and the tasks that serve them in the background.
async fn ports(
    config: &Config,
    routed: RoutedUpstream,
    outputs: Option<Arc<dyn OutputStore>>,
) -> Result<(Ports, StorePorts), StartError> {
    let stores = store_ports(config).await?;
    let upstream = Arc::new(routed.with_slots(Arc::clone(&stores.slots)));
    let admin = stores.admin.clone();
    let ports = Ports {
        jobs: admin.jobs,
        batches: Arc::clone(&stores.batches),
        openai_batches: Arc::clone(&stores.openai_batches),
        removals: Arc::clone(&stores.removals),
        accounts: admin.accounts,
        usage: admin.usage,
        catalog: admin.catalog,
        route_schemas: admin.route_schemas,
        upstream,
        outputs,
        uploads: Arc::clone(&stores.uploads),
        events: Arc::clone(&stores.events),
        rate_limiter: Arc::clone(&stores.rate_limiter),
        clock: admin.clock,
        ids: admin.ids,
        traces: match config.traces {
            Some(_) => Arc::new(OtelTraces),
            None => Arc::new(NoTraces),
        },
    };
    Ok((ports, stores))
}

/// What each provider knows of its endpoints, to check the routes of the models put.
fn route_schemas() -> Vec<Arc<dyn genjobs_domain::ports::RouteSchemas>> {
    vec![Arc::new(FalSchemas), Arc::new(ReplicateSchemas)]
}

/// The operators' use cases over the configured store alone, for the command line's
/// administration; its catalog is the store's (filled with the initial catalog if it never held a
/// model, as at start).
///
/// # Errors
/// See [`StartError`].
pub async fn admin(config: &Config) -> Result<Admin, StartError> {
    add_fal_schemas(config)?;
    let stores = store_ports(config).await?;
    let admin = Admin::new(stores.admin, LiveCatalog::default(), config.gateway.default_limits)
        .with_credit_usd(config.credit_usd);
    admin
        .seed_catalog(initial_documents(config)?)
        .await
        .map_err(|e| StartError::Catalog { path: "initial".into(), problem: e.to_string() })?;
    Ok(admin)
}

/// A new admin token in place of the one kept in the configured store, to print once; the
/// replicas over the store take it when they next start.
///
/// # Errors
/// See [`StartError`].
pub async fn new_admin_token(config: &Config) -> Result<String, StartError> {
    let stores = store_ports(config).await?;
    secrets::replace_admin_token(&*stores.kept).await
}

/// The adapters of client webhooks over the store's `outbox`, users' secrets sealed under the
/// resolved key (and opened under the earlier one too).
fn client_webhooks(
    config: &Config,
    outbox: Arc<dyn WebhookStore>,
    secrets: &secrets::ServiceSecrets,
) -> Result<ClientWebhookPorts, StartError> {
    let transport = HttpWebhookTransport::new(config.client_webhooks.clone())
        .map_err(|e| StartError::ClientWebhooks(e.to_string()))?;
    let vault = secrets
        .earlier_webhook_key
        .iter()
        .fold(SealedSecrets::new(&secrets.webhook_key), |vault, earlier| vault.also_opening(earlier));
    Ok(ClientWebhookPorts { store: outbox, transport: Arc::new(transport), vault: Arc::new(vault) })
}

/// The moderation service every job is checked by before it is sent, when
/// `GENJOBS_MODERATION_URL` names one (`sim`: the built-in simulator's word list).
fn moderator(config: &Config, simulator: Option<&RunningSim>) -> Result<Option<Moderator>, StartError> {
    let simulator = simulator.map(|sim| sim.base_url.as_str());
    let Some(service) = OpenAiModeration::from_args(&config.moderation, simulator).map_err(StartError::Moderation)?
    else {
        return Ok(None);
    };
    let settings = config.moderation.settings();
    tracing::info!(
        fail_open = settings.fail_open,
        retry_window_secs = settings.retry_window.as_secs(),
        "jobs are checked by the moderation service before they are sent"
    );
    Ok(Some(Moderator { service: Arc::new(service), settings }))
}

/// Builds every adapter, binds, and starts the job driver; the returned [`Service`] serves once
/// run. Must be called inside a tokio runtime.
///
/// # Errors
/// See [`StartError`].
pub async fn start(config: Config) -> Result<Service, StartError> {
    secrets::refuse_short(&config)?;
    let fal_keys = match config.upstream_key.as_deref() {
        Some(keys) => capacity::key_list("GENJOBS_UPSTREAM_KEY", keys)?,
        None => Vec::new(),
    };
    let jobs_per_key = capacity::cap("GENJOBS_UPSTREAM_MAX_IN_FLIGHT", config.upstream_max_in_flight)?;
    let replicate = config.replicate.config(config.public_url.as_deref())?;
    add_fal_schemas(&config)?;
    let initial_catalog = initial_documents(&config)?;
    let simulator = simulator::start_unless_configured(&config)?;
    let upstream_url = config.upstream_url.clone().or_else(|| simulator.as_ref().map(|s| s.base_url.clone()));
    let webhooks = config.public_url.as_deref().map(|public_url| {
        let jwks = config.fal_jwks_url.clone().or_else(|| simulator.as_ref().map(RunningSim::jwks_url));
        WebhookConfig {
            user_id: config.fal_user_id.clone(),
            ..WebhookConfig::new(public_url, jwks.unwrap_or_else(|| FAL_JWKS_URL.to_owned()))
        }
    });
    let provider_url = upstream_url.unwrap_or_default();
    let replicate_url = config.replicate.replicate_token.is_some().then_some(config.replicate.replicate_url.as_str());
    let provider_urls = std::iter::once(provider_url.as_str()).chain(replicate_url);
    let output_hosts = OutputHosts::new(config.output_hosts.iter().map(String::as_str), provider_urls);
    // fal's start timeout is the job timeout: a request that has not started by the job's
    // deadline can no longer be delivered (the job fails `UPSTREAM_TIMEOUT` then), so fal may as
    // well drop it; one that started is canceled by the driver at the deadline.
    let fal = FalConfig {
        webhooks,
        start_timeout: Some(config.driver.steps.job_timeout),
        keys: fal_keys,
        jobs_per_key,
        ..FalConfig::new(provider_url, None)
    };
    let fal: Arc<dyn UpstreamProvider> = Arc::new(MeteredUpstream::new(Arc::new(FalUpstream::new(fal)?)));
    let replicate = match replicate {
        Some(replicate) => {
            tracing::info!(url = %replicate.base_url, webhooks = replicate.webhook.is_some(), "replicate routes run at Replicate");
            let adapter = Arc::new(MeteredUpstream::new(Arc::new(ReplicateUpstream::new(replicate)?)));
            vec![adapter as Arc<dyn UpstreamProvider>]
        }
        None => Vec::new(),
    };
    let routed = RoutedUpstream::new(fal, replicate, REFUSED_RETRY_PAUSE);
    let outputs = match config.output_store_url() {
        Some(url) => {
            let store = ObjectOutputStore::open(url, std::env::vars(), config.output_max_bytes, output_hosts.clone())?;
            tracing::info!(output_store = url, "outputs are copied before jobs are shown succeeded");
            Some(Arc::new(RetriedCopies::new(Arc::new(store), Arc::new(SystemClock))) as Arc<dyn OutputStore>)
        }
        None => None,
    };
    let (ports, stores) = ports(&config, routed, outputs).await?;
    let secrets = secrets::resolve(&config, &*stores.kept).await?;
    let postgres = stores.postgres;
    let catalog = LiveCatalog::default();
    let driver = JobDriver::new(ports.clone(), catalog.clone(), config.driver.clone());
    let driver = match moderator(&config, simulator.as_ref())? {
        Some(moderator) => driver.with_moderator(moderator),
        None => driver,
    };
    let retention = config.retention.map(|retention| RetentionSweep {
        usage: Arc::clone(&ports.usage),
        clock: Arc::clone(&ports.clock),
        retention,
    });
    let sealing = UsageSealing {
        usage: Arc::clone(&ports.usage),
        clock: Arc::clone(&ports.clock),
        every: genjobs_driver::sealing::SEAL_CHECK_INTERVAL,
    };
    let source = HttpOutputSource::new(output_hosts).map_err(genjobs_output_store::OpenError::Client)?;
    let webhooks = client_webhooks(&config, stores.outbox, &secrets)?;
    let services = Services::new(&ports, catalog, config.gateway.clone())
        .with_credit_usd(config.credit_usd)
        .with_handoff(driver.handoff())
        .with_output_source(Arc::new(source))
        .with_client_webhooks(webhooks.clone());
    services
        .admin
        .seed_catalog(initial_catalog)
        .await
        .map_err(|e| StartError::Catalog { path: "initial".into(), problem: e.to_string() })?;
    let catalog_follower = CatalogFollower {
        admin: services.admin.clone(),
        store: Arc::clone(&ports.catalog),
        every: CATALOG_RELOAD_INTERVAL,
    };
    let demo_key = match config.database_url {
        Some(_) => None,
        None => {
            let demo = NewUserRequest {
                name: "demo".into(),
                credits: genjobs_domain::credits::Credits::new(config.demo_credits),
                rate_limit_per_minute: None,
                max_concurrent_jobs: None,
                price_percent: None,
            };
            let (_, key) = services.admin.create_user(demo).await.map_err(|e| StartError::Demo(e.to_string()))?;
            Some(key.expose().to_owned())
        }
    };

    let drain = Drain::new();

    let listener = TcpListener::bind(config.bind)?;
    let address = listener.local_addr()?;
    let services_uploads = services.uploads.clone();
    let batch_windows = BatchWindows { batches: services.batches.clone(), clock: Arc::new(SystemClock) };
    let mut state = AppState::new(services, secrets.admin_token, &secrets.link_key, config.http.clone());
    state.drain = drain.clone();
    if let Some(pg) = &postgres {
        let store = Arc::clone(&pg.store);
        state.metrics = state.metrics.with_collector(Arc::new(move || store.record_pool_gauges()));
    }
    let base = config.public_url.clone().unwrap_or_else(|| format!("http://{address}"));
    let bodies = Arc::new(WebhookBodies::new(state.links.clone(), base));
    let deliveries = WebhookDeliveries::new(ports, webhooks, bodies, config.dispatch.deliveries.clone());
    let dispatcher = WebhookDispatcher::new(deliveries, config.dispatch.clone());
    let uploads = UploadSweep::new(services_uploads, Arc::new(SystemClock));
    let loops = Loops {
        jobs: driver,
        client_webhooks: dispatcher,
        catalog: catalog_follower,
        retention,
        sealing,
        uploads,
        batch_windows,
    };
    let stopping = drain.clone();
    let loops = loops.start(move || {
        let drain = stopping.clone();
        async move { drain.started().await }
    });
    let server = genjobs_http::serve(listener, state)?;
    Ok(Service {
        address,
        admin_token: secrets.generated_admin_token,
        demo_key,
        simulator_url: simulator.as_ref().map(|s| s.base_url.clone()),
        server,
        drain,
        loops,
        postgres,
        simulator,
    })
}
