//! # genjobs
//!
//! The binary's library half: [`start`] reads a [`Config`], builds the adapters, and starts the
//! HTTP server and the job driver. `main.rs` only parses the command line and prints what an
//! operator needs; the integration tests call [`start`] on port 0.
//!
//! With no environment, genjobs runs on the embedded default: the in-memory store and the fal
//! queue simulator, started in process on a loopback port and reached through the real fal
//! adapter over HTTP.

mod config;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::dev::{Server, ServerHandle};
use genjobs_domain::catalog::{Catalog, CatalogError};
use genjobs_domain::ids::{AdminToken, ApiKey};
use genjobs_domain::ports::{Limits, RandomIds};
use genjobs_domain::usecases::{DriverSettings, Gateway, JobDriver, NewUserRequest, Ports, Settings};
use genjobs_http::{AppState, HttpSettings};
use genjobs_runtime::{EventHub, SystemClock, TokenBucketLimiter};
use genjobs_store_memory::MemoryStore;
use genjobs_upstream_fal::{FalConfig, FalUpstream};
use genjobs_upstream_sim::{RunningSim, SimConfig};
use tokio::task::JoinHandle;

pub use config::{Config, ConfigError};

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A configuration variable is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The model catalog cannot be read or is inconsistent.
    #[error("model catalog {path}: {source}")]
    Catalog {
        /// Where it was read from.
        path: String,
        /// What is wrong.
        source: CatalogError,
    },
    /// The catalog file cannot be read.
    #[error("cannot read the model catalog {path}: {source}")]
    CatalogFile {
        /// Where it was read from.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `DATABASE_URL` names a store this build does not have.
    #[error("DATABASE_URL is set, but this build serves only the embedded in-memory store; unset it")]
    NoDatabaseStore,
    /// The listen address or the simulator's port cannot be bound.
    #[error("cannot listen: {0}")]
    Bind(#[from] std::io::Error),
    /// The upstream HTTP client cannot be built.
    #[error(transparent)]
    Upstream(#[from] genjobs_upstream_fal::BuildError),
    /// The demo user cannot be created.
    #[error("cannot create the demo user: {0}")]
    Demo(String),
}

/// A started service.
pub struct Service {
    /// Where it listens.
    pub address: SocketAddr,
    /// The admin token in effect (generated when not configured).
    pub admin_token: String,
    /// The demo user's key, with the in-memory store.
    pub demo_key: Option<String>,
    /// The built-in simulator's base URL, when it runs.
    pub simulator_url: Option<String>,
    server: Server,
    driver: JoinHandle<()>,
    simulator: Option<RunningSim>,
}

impl Service {
    /// A handle to stop the HTTP server.
    #[must_use]
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Serves until the server stops (SIGTERM / SIGINT, or [`ServerHandle::stop`]), then stops
    /// the driver and the simulator.
    ///
    /// # Errors
    /// When the server fails.
    pub async fn run(self) -> std::io::Result<()> {
        let served = self.server.await;
        self.driver.abort();
        if let Some(sim) = &self.simulator {
            sim.stop().await;
        }
        served
    }
}

fn catalog(config: &Config) -> Result<Catalog, StartError> {
    match &config.models_path {
        None => Catalog::builtin().map_err(|source| StartError::Catalog { path: "built-in".into(), source }),
        Some(path) => {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|source| StartError::CatalogFile { path: shown.clone(), source })?;
            Catalog::from_json(&text).map_err(|source| StartError::Catalog { path: shown, source })
        }
    }
}

/// Builds every adapter, binds, and starts the job driver; the returned [`Service`] serves once
/// run. Must be called inside a tokio runtime.
///
/// # Errors
/// See [`StartError`].
pub async fn start(config: Config) -> Result<Service, StartError> {
    if config.database_url.is_some() {
        return Err(StartError::NoDatabaseStore);
    }
    let catalog = Arc::new(catalog(&config)?);
    let simulator = match &config.upstream_url {
        Some(_) => None,
        None => Some(genjobs_upstream_sim::spawn(SimConfig {
            queue: config.sim_queue,
            run: config.sim_run,
            api_key: None,
        })?),
    };
    let upstream_url = config.upstream_url.clone().or_else(|| simulator.as_ref().map(|s| s.base_url.clone()));
    let upstream = FalUpstream::new(FalConfig::new(upstream_url.unwrap_or_default(), config.upstream_key.clone()))?;
    let store = Arc::new(MemoryStore::new());
    let ports = Ports {
        jobs: store.clone(),
        accounts: store,
        upstream: Arc::new(upstream),
        events: Arc::new(EventHub::new()),
        rate_limiter: Arc::new(TokenBucketLimiter::new()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
    };
    let settings = Settings {
        poll_interval: config.poll_interval,
        default_limits: Limits {
            rate_limit_per_minute: config.default_rate_limit_per_minute,
            max_concurrent_jobs: config.default_max_concurrent_jobs,
        },
        upstream_cancel: config.upstream_cancel,
    };
    let gateway = Gateway::new(ports.clone(), Arc::clone(&catalog), settings);
    let demo = gateway
        .create_user(NewUserRequest {
            name: "demo".into(),
            credits: genjobs_domain::credits::Credits::new(config.demo_credits),
            rate_limit_per_minute: None,
            max_concurrent_jobs: None,
        })
        .await
        .map_err(|e| StartError::Demo(e.to_string()))?;

    let driver = JobDriver::new(ports, catalog, DriverSettings::new(config.poll_interval, config.job_timeout));
    let driver = tokio::spawn(async move { driver.run().await });

    let admin_token =
        config.admin_token.clone().unwrap_or_else(|| ApiKey::generate().expose().replacen("gj_", "gja_", 1));
    let listener = TcpListener::bind(config.bind)?;
    let address = listener.local_addr()?;
    let state = AppState {
        gateway,
        admin_token: AdminToken::new(&admin_token),
        settings: HttpSettings {
            stream_max: config.stream_max,
            keep_alive: config.sse_keep_alive,
            ..HttpSettings::default()
        },
    };
    let server = genjobs_http::serve(listener, state)?;
    Ok(Service {
        address,
        admin_token,
        demo_key: Some(demo.1.expose().to_owned()),
        simulator_url: simulator.as_ref().map(|s| s.base_url.clone()),
        server,
        driver,
        simulator,
    })
}
