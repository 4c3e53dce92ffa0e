//! Configuration: every `GENJOBS_*` variable of the contract is also a command-line flag (clap
//! reads both, the flag winning), and each default shown by `--help` comes from the adapter that
//! owns it, so it is defined once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use genjobs_client_webhooks::{ClientWebhookArgs, TransportSettings};
use genjobs_domain::batch::{BatchSettings, DEFAULT_BATCH_PRICE_PERCENT};
use genjobs_domain::catalog::PricePercent;
use genjobs_domain::client_webhooks::RetryPolicy;
use genjobs_domain::decimal::Decimal;
use genjobs_domain::ports::Limits;
use genjobs_domain::upload::{DEFAULT_UPLOAD_BYTES_PER_DAY, DEFAULT_UPLOAD_TTL, UploadSettings};
use genjobs_domain::usecases::{DEFAULT_CREDIT_USD, DeliverySettings, Settings};
use genjobs_driver::retention::Retention;
use genjobs_driver::{DispatchSettings, DriverSettings};
use genjobs_http::HttpSettings;
use genjobs_moderation_openai::ModerationArgs;
use genjobs_output_store::OutputStoreArgs;
use genjobs_store_postgres::{PgArgs, PgSettings};
use genjobs_upstream_fal::FalArgs;
use genjobs_upstream_replicate::ReplicateArgs;

use crate::traces::{TraceArgs, TraceExport};
#[cfg(feature = "sim")]
use genjobs_upstream_sim::{SimArgs, SimConfig};

/// The service's configuration: the wiring choices of the binary, and each adapter's own
/// settings, whose defaults live with the adapter (the domain's [`Settings`] and
/// [`DriverSettings`], [`HttpSettings`], [`PgSettings`], and the simulator's `SimConfig`).
#[derive(Debug, Clone)]
pub struct Config {
    /// `GENJOBS_BIND`.
    pub bind: SocketAddr,
    /// `DATABASE_URL`; `None` means the in-memory store.
    pub database_url: Option<String>,
    /// `GENJOBS_ADMIN_TOKEN`; generated when absent.
    pub admin_token: Option<String>,
    /// `GENJOBS_UPSTREAM_URL`; `None` means the built-in simulator.
    pub upstream_url: Option<String>,
    /// `GENJOBS_UPSTREAM_KEY`: one key, or several separated by commas.
    pub upstream_key: Option<String>,
    /// `GENJOBS_UPSTREAM_MAX_IN_FLIGHT`: jobs in flight per fal key (0: no cap; checked at start).
    pub upstream_max_in_flight: i64,
    /// `GENJOBS_MODELS`.
    pub models_path: Option<PathBuf>,
    /// `GENJOBS_FAL_SCHEMAS`.
    pub fal_schemas_path: Option<PathBuf>,
    /// `GENJOBS_DEMO_CREDITS`.
    pub demo_credits: u64,
    /// `GENJOBS_CREDIT_USD`: what one credit is worth, for revenue and margins.
    pub credit_usd: Decimal,
    /// `GENJOBS_PUBLIC_URL`: where the provider (and clients) reach the service; set, it turns
    /// fal's webhooks on ([`Config::with_public_url`]).
    pub public_url: Option<String>,
    /// `GENJOBS_FAL_JWKS_URL`; `None` means fal's own, or the built-in simulator's when it runs.
    pub fal_jwks_url: Option<String>,
    /// `GENJOBS_FAL_USER_ID`: fal's webhooks for another account are refused; `None` takes any.
    pub fal_user_id: Option<String>,
    /// `GENJOBS_REPLICATE_URL`, `GENJOBS_REPLICATE_TOKEN` (Replicate is configured when it is
    /// set) and `GENJOBS_REPLICATE_WEBHOOK_SECRET`.
    pub replicate: ReplicateArgs,
    /// `GENJOBS_OUTPUT_STORE`; `None` means `memory://` with the in-memory store and no copies
    /// with Postgres, and `none` turns copies off.
    pub output_store: Option<String>,
    /// `GENJOBS_OUTPUT_MAX_BYTES`: the largest output copied.
    pub output_max_bytes: u64,
    /// `GENJOBS_OUTPUT_HOSTS`: the media hosts (with their subdomains) outputs are read from,
    /// besides the configured provider's own host.
    pub output_hosts: Vec<String>,
    /// The use cases: poll interval, default limits, `GENJOBS_UPSTREAM_CANCEL`.
    pub gateway: Settings,
    /// The job driver: `GENJOBS_JOB_TIMEOUT_SECS`, `GENJOBS_LEASE_SECS`, and the poll interval.
    pub driver: DriverSettings,
    /// The HTTP edge: SSE lifetime and keep-alive, worker threads.
    pub http: HttpSettings,
    /// Postgres (its `url` is `database_url`): pool, timeouts, caches.
    pub postgres: PgSettings,
    /// The built-in simulator: `GENJOBS_SIM_QUEUE_MS`, `GENJOBS_SIM_RUN_MS`,
    /// `GENJOBS_SIM_MAX_IN_PROGRESS_PER_KEY`, `GENJOBS_SIM_PORT`.
    #[cfg(feature = "sim")]
    pub simulator: SimConfig,
    /// How long final jobs are kept (`GENJOBS_JOB_RETENTION_DAYS`); `None` keeps them forever.
    pub retention: Option<Retention>,
    /// `GENJOBS_SECRET_KEY`: encrypts users' webhook secrets; `None` uses a random key made at
    /// the first start and kept with the store.
    pub secret_key: Option<String>,
    /// `GENJOBS_LINK_SECRET`: output links' signing key is derived from it; `None` uses a random
    /// key made at the first start and kept with the store.
    pub link_secret: Option<String>,
    /// Client webhook attempts: `GENJOBS_WEBHOOK_ALLOW_PRIVATE`, and the per-attempt timeout
    /// (10 s; tests shorten it here, it has no variable).
    pub client_webhooks: TransportSettings,
    /// The client webhook dispatcher: `GENJOBS_CLIENT_WEBHOOK_BACKOFF_MS` is its first retry delay.
    pub dispatch: DispatchSettings,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_EXPORTER_OTLP_PROTOCOL`: where spans are exported;
    /// `None` exports none.
    pub traces: Option<TraceExport>,
    /// `GENJOBS_MODERATION_*`: the moderation service jobs are checked by; none by default.
    pub moderation: ModerationArgs,
}

const DEFAULT_BIND: &str = "127.0.0.1:8080";
const DEFAULT_DEMO_CREDITS: u64 = 1000;

impl Default for Config {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: None,
            admin_token: None,
            upstream_url: None,
            upstream_key: None,
            upstream_max_in_flight: 0,
            models_path: None,
            fal_schemas_path: None,
            demo_credits: DEFAULT_DEMO_CREDITS,
            credit_usd: DEFAULT_CREDIT_USD,
            public_url: None,
            fal_jwks_url: None,
            fal_user_id: None,
            replicate: ReplicateArgs::default(),
            output_store: None,
            output_max_bytes: genjobs_output_store::DEFAULT_MAX_BYTES,
            output_hosts: genjobs_output_store::DEFAULT_OUTPUT_HOSTS.iter().map(|h| (*h).to_owned()).collect(),
            gateway: Settings::default(),
            driver: DriverSettings::default(),
            http: HttpSettings::default(),
            retention: None,
            postgres: PgSettings::default(),
            #[cfg(feature = "sim")]
            simulator: SimConfig::default(),
            secret_key: None,
            link_secret: None,
            client_webhooks: TransportSettings::default(),
            dispatch: DispatchSettings::default(),
            traces: None,
            moderation: ModerationArgs::default(),
        }
    }
}

impl Config {
    /// Sets the upstream poll interval, which is also the interval of `progress` events and the
    /// pace of the driver.
    #[must_use]
    pub fn with_poll_interval(self, poll_interval: Duration) -> Self {
        Self {
            gateway: Settings { poll_interval, ..self.gateway },
            driver: self.driver.with_poll_interval(poll_interval),
            ..self
        }
    }

    /// Sets the public URL, which turns fal's webhooks on: submissions name
    /// `<public_url>/api/upstream/fal/webhook`, waiters announce themselves, and a job nobody
    /// watches is polled only every `fallback_poll`. Output links are rooted there too.
    #[must_use]
    pub fn with_public_url(self, public_url: String, fallback_poll: Duration) -> Self {
        Self {
            gateway: Settings { upstream_notifies: true, ..self.gateway },
            driver: DriverSettings { unwatched_poll_interval: Some(fallback_poll), ..self.driver },
            http: HttpSettings { public_url: Some(public_url.clone()), ..self.http },
            public_url: Some(public_url),
            ..self
        }
    }

    /// Where outputs are copied to: `GENJOBS_OUTPUT_STORE`, else `memory://` on the embedded
    /// default; `None` for no copies.
    #[must_use]
    pub fn output_store_url(&self) -> Option<&str> {
        match self.output_store.as_deref() {
            Some("none") => None,
            Some(url) => Some(url),
            None if self.database_url.is_none() => Some("memory://"),
            None => None,
        }
    }

    /// The Postgres settings with `database_url`, when there is one.
    #[must_use]
    pub fn postgres_settings(&self) -> Option<PgSettings> {
        self.database_url.as_ref().map(|url| PgSettings { url: url.clone(), ..self.postgres.clone() })
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The contract's "at least every 15 s" for `: keep-alive` comments.
const MAX_KEEP_ALIVE_SECS: u64 = 15;

/// The service's settings as flags and variables, taken by `genjobs` itself and by each of its
/// service subcommands (`genjobs serve --bind …`, `genjobs config --bind …`); the client
/// subcommands do not show them. Each adapter's own settings are its `Args`, flattened here where
/// `--help` keeps its sections in order.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct ConfigArgs {
    /// Listen address.
    #[arg(long, env = "GENJOBS_BIND", default_value = DEFAULT_BIND, help_heading = "Service")]
    pub bind: SocketAddr,
    /// Postgres URL; unset means the embedded in-memory store.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, help_heading = "Service")]
    pub database_url: Option<String>,
    /// Bearer token for /api/admin/* and /metrics, at least 32 characters [default: generated
    /// and printed by the first start over a store, which keeps only its hash].
    #[arg(long, env = "GENJOBS_ADMIN_TOKEN", hide_env_values = true, help_heading = "Service")]
    pub admin_token: Option<String>,
    /// Also ask the provider to stop canceled jobs (best effort).
    #[arg(long, env = "GENJOBS_UPSTREAM_CANCEL", help_heading = "Upstream",
        value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub upstream_cancel: bool,
    /// Upstream poll interval per running job, and the interval of `progress` events.
    #[arg(long, env = "GENJOBS_POLL_INTERVAL_MS", default_value_t = millis(Settings::default().poll_interval),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Jobs")]
    pub poll_interval_ms: u64,
    /// A job not final after this long fails with UPSTREAM_TIMEOUT.
    #[arg(long, env = "GENJOBS_JOB_TIMEOUT_SECS", default_value_t = DriverSettings::default().steps.job_timeout.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Jobs")]
    pub job_timeout_secs: u64,
    /// How long a replica keeps a claimed job before another may take it over.
    #[arg(long, env = "GENJOBS_LEASE_SECS", default_value_t = DriverSettings::default().steps.lease.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Jobs")]
    pub lease_secs: u64,
    /// Path to a catalog file ({"models": [...]}, as `genjobs models export` writes it) that fills an
    /// empty catalog store instead of the built-in models.
    #[arg(long, env = "GENJOBS_MODELS", help_heading = "Jobs")]
    pub models: Option<PathBuf>,
    /// Requests per minute per user, all /api/v1 endpoints.
    #[arg(long, env = "GENJOBS_DEFAULT_RATE_LIMIT_PER_MINUTE", default_value_t = default_limits().rate_limit_per_minute,
        value_parser = clap::value_parser!(u32).range(1..), help_heading = "Users")]
    pub default_rate_limit_per_minute: u32,
    /// Non-final jobs per user.
    #[arg(long, env = "GENJOBS_DEFAULT_MAX_CONCURRENT_JOBS", default_value_t = default_limits().max_concurrent_jobs,
        value_parser = clap::value_parser!(u32).range(1..), help_heading = "Users")]
    pub default_max_concurrent_jobs: u32,
    /// With the in-memory store, the demo user's credits.
    #[arg(long, env = "GENJOBS_DEMO_CREDITS", default_value_t = DEFAULT_DEMO_CREDITS,
        help_heading = "Users")]
    pub demo_credits: u64,
    /// What one credit is worth in US dollars (a decimal), for the revenue and margins of the
    /// operators' usage report.
    #[arg(long, env = "GENJOBS_CREDIT_USD", default_value = "0.01", value_parser = credit_usd,
        help_heading = "Users")]
    pub credit_usd: Decimal,
    /// What a batch's item costs, in percent of its model's price (the user's tier applies on
    /// top), rounded up per item.
    #[arg(long, env = "GENJOBS_BATCH_PRICE_PERCENT", default_value_t = DEFAULT_BATCH_PRICE_PERCENT,
        value_parser = clap::value_parser!(u32).range(1..=1000), help_heading = "Jobs")]
    pub batch_price_percent: u32,
    /// Days a final job is kept before it is removed (its ledger and usage stay) [default: kept
    /// forever].
    #[arg(long, env = "GENJOBS_JOB_RETENTION_DAYS", value_parser = clap::value_parser!(u64).range(1..=36_500),
        help_heading = "Jobs")]
    pub job_retention_days: Option<u64>,
    /// Lifetime of one SSE connection.
    #[arg(long, env = "GENJOBS_STREAM_MAX_SECS", default_value_t = HttpSettings::default().stream_max.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "HTTP")]
    pub stream_max_secs: u64,
    /// Interval of `: keep-alive` comments on an SSE connection (at most 15).
    #[arg(long, env = "GENJOBS_SSE_KEEPALIVE_SECS", default_value_t = HttpSettings::default().keep_alive.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=MAX_KEEP_ALIVE_SECS), help_heading = "HTTP")]
    pub sse_keepalive_secs: u64,
    /// Seconds after its headers within which a request's body must have arrived; a body that
    /// stalls is answered 408 and its connection closed.
    #[arg(long, env = "GENJOBS_BODY_READ_TIMEOUT_SECS", default_value_t = HttpSettings::default().body_read_timeout.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "HTTP")]
    pub body_read_timeout_secs: u64,
    /// Believe `Forwarded` and `X-Forwarded-*` (for link roots and client addresses): only behind a
    /// proxy that sets them and strips what clients sent.
    #[arg(long, env = "GENJOBS_TRUST_FORWARDED", help_heading = "HTTP",
        value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub trust_forwarded: bool,
    /// Unauthenticated requests (answered 401) one client address may make per minute; beyond,
    /// 429 without a look-up.
    #[arg(long, env = "GENJOBS_UNAUTHENTICATED_PER_MINUTE",
        default_value_t = HttpSettings::default().unauthenticated_per_minute,
        value_parser = clap::value_parser!(u32).range(1..), help_heading = "HTTP")]
    pub unauthenticated_per_minute: u32,
    /// HTTP worker threads [default: one per core].
    #[arg(long, env = "GENJOBS_HTTP_WORKERS", value_parser = clap::value_parser!(u64).range(1..1024),
        help_heading = "HTTP")]
    pub http_workers: Option<u64>,
    #[command(flatten)]
    pub postgres: PgArgs,
    #[cfg(feature = "sim")]
    #[command(flatten)]
    pub simulator: SimArgs,
    /// Base URL at which fal (and clients) reach this service; set, fal delivers webhooks to
    /// `<this>/api/upstream/fal/webhook` and output links are rooted here.
    #[arg(long, env = "GENJOBS_PUBLIC_URL", help_heading = "Webhooks and stored outputs")]
    pub public_url: Option<String>,
    #[command(flatten)]
    pub fal: FalArgs,
    #[command(flatten)]
    pub replicate: ReplicateArgs,
    #[command(flatten)]
    pub moderation: ModerationArgs,
    /// With webhooks on, how often a job nobody watches is polled.
    #[arg(long, env = "GENJOBS_WEBHOOK_FALLBACK_POLL_SECS", default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Webhooks and stored outputs")]
    pub webhook_fallback_poll_secs: u64,
    /// How long an output link stays valid.
    #[arg(long, env = "GENJOBS_OUTPUT_URL_TTL_SECS", default_value_t = HttpSettings::default().output_url_ttl.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Webhooks and stored outputs")]
    pub output_url_ttl_secs: u64,
    /// How long an uploaded image (`POST /api/v1/uploads`, and the images of `images.edit`) and
    /// its link are kept; deleted afterwards, unless a job not yet final still needs it.
    #[arg(long, env = "GENJOBS_UPLOAD_TTL_SECS", default_value_t = DEFAULT_UPLOAD_TTL.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Webhooks and stored outputs")]
    pub upload_ttl_secs: u64,
    /// Bytes one user may upload per UTC day (uploads and the images of edits); past it, 429
    /// `UPLOAD_QUOTA_EXCEEDED`.
    #[arg(long, env = "GENJOBS_UPLOAD_BYTES_PER_DAY", default_value_t = DEFAULT_UPLOAD_BYTES_PER_DAY,
        help_heading = "Webhooks and stored outputs")]
    pub upload_bytes_per_day: u64,
    #[command(flatten)]
    pub outputs: OutputStoreArgs,
    /// First retry delay of a client webhook; the k-th retry waits this × 2^(k−1), ±20 %, at
    /// most an hour.
    #[arg(long, env = "GENJOBS_CLIENT_WEBHOOK_BACKOFF_MS",
        default_value_t = millis(RetryPolicy::default().first_delay),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Webhooks and stored outputs")]
    pub client_webhook_backoff_ms: u64,
    #[command(flatten)]
    pub client_webhooks: ClientWebhookArgs,
    /// Random text, at least 32 characters, that output links' signing key is derived from (HKDF)
    /// [default: a random key made at the first start and kept with the store].
    #[arg(long, env = "GENJOBS_LINK_SECRET", hide_env_values = true, help_heading = "Webhooks and stored outputs")]
    pub link_secret: Option<String>,
    /// Log line format [default: text on a terminal, json otherwise]; RUST_LOG filters them.
    #[arg(long, env = "GENJOBS_LOG_FORMAT", value_enum, help_heading = "Service")]
    pub log_format: Option<LogFormat>,
    #[command(flatten)]
    pub traces: TraceArgs,
}

/// Reads `GENJOBS_CREDIT_USD`: a decimal of at least 0, nine fractional digits at most.
fn credit_usd(text: &str) -> Result<Decimal, String> {
    text.parse::<Decimal>()
        .ok()
        .filter(|usd| !usd.is_negative())
        .ok_or_else(|| format!("GENJOBS_CREDIT_USD must be a decimal of at least 0, such as 0.01; got {text:?}"))
}

fn default_limits() -> Limits {
    Settings::default().default_limits
}

impl ConfigArgs {
    /// The configuration these flags and variables describe.
    #[must_use]
    pub fn into_config(self) -> Config {
        let defaults = Config::default();
        let gateway = Settings {
            default_limits: Limits {
                rate_limit_per_minute: self.default_rate_limit_per_minute,
                max_concurrent_jobs: self.default_max_concurrent_jobs,
            },
            upstream_cancel: self.upstream_cancel,
            // Within 1 to 1,000: the flag's parser refused anything else.
            batch: BatchSettings {
                price_percent: PricePercent::new(u64::from(self.batch_price_percent)).unwrap_or_default(),
            },
            uploads: UploadSettings {
                ttl: Duration::from_secs(self.upload_ttl_secs),
                bytes_per_day: self.upload_bytes_per_day,
            },
            ..defaults.gateway
        };
        let driver = defaults
            .driver
            .with_job_timeout(Duration::from_secs(self.job_timeout_secs))
            .with_lease(Duration::from_secs(self.lease_secs));
        let http = HttpSettings {
            stream_max: Duration::from_secs(self.stream_max_secs),
            keep_alive: Duration::from_secs(self.sse_keepalive_secs),
            workers: self.http_workers.map(|n| n as usize),
            output_url_ttl: Duration::from_secs(self.output_url_ttl_secs),
            body_read_timeout: Duration::from_secs(self.body_read_timeout_secs),
            trust_forwarded: self.trust_forwarded,
            unauthenticated_per_minute: self.unauthenticated_per_minute,
            ..defaults.http
        };
        let config = Config {
            bind: self.bind,
            database_url: self.database_url,
            admin_token: self.admin_token,
            upstream_url: self.fal.upstream_url,
            upstream_key: self.fal.upstream_key,
            upstream_max_in_flight: self.fal.upstream_max_in_flight,
            models_path: self.models,
            fal_schemas_path: self.fal.fal_schemas,
            demo_credits: self.demo_credits,
            credit_usd: self.credit_usd,
            public_url: None,
            fal_jwks_url: self.fal.fal_jwks_url,
            fal_user_id: self.fal.fal_user_id,
            replicate: self.replicate,
            output_store: self.outputs.output_store,
            output_max_bytes: self.outputs.output_max_bytes,
            output_hosts: self.outputs.output_hosts,
            gateway,
            driver,
            http,
            postgres: self.postgres.settings(),
            #[cfg(feature = "sim")]
            simulator: self.simulator.config(),
            retention: self.job_retention_days.map(|days| Retention::keeping(Duration::from_secs(days * 86_400))),
            client_webhooks: self.client_webhooks.transport_settings(),
            secret_key: self.client_webhooks.secret_key,
            link_secret: self.link_secret,
            dispatch: DispatchSettings {
                deliveries: DeliverySettings {
                    retry: RetryPolicy {
                        first_delay: Duration::from_millis(self.client_webhook_backoff_ms),
                        ..defaults.dispatch.deliveries.retry
                    },
                    ..defaults.dispatch.deliveries
                },
                ..defaults.dispatch
            },
            traces: self.traces.export(),
            moderation: self.moderation,
        }
        .with_poll_interval(Duration::from_millis(self.poll_interval_ms));
        match self.public_url {
            Some(url) => config.with_public_url(url, Duration::from_secs(self.webhook_fallback_poll_secs)),
            None => config,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_copied_by_default_in_memory_only() {
        let memory = Config::default();
        assert_eq!(memory.output_store_url(), Some("memory://"));
        let postgres = Config { database_url: Some("postgres://db/genjobs".into()), ..Config::default() };
        assert_eq!(postgres.output_store_url(), None, "unset with Postgres: no copies");
        let s3 = Config { output_store: Some("s3://bucket/prefix".into()), ..postgres.clone() };
        assert_eq!(s3.output_store_url(), Some("s3://bucket/prefix"));
        let off = Config { output_store: Some("none".into()), ..memory };
        assert_eq!(off.output_store_url(), None);
    }

    #[test]
    fn a_public_url_turns_webhooks_on_everywhere_they_matter() {
        let plain = Config::default();
        assert!(!plain.gateway.upstream_notifies && plain.driver.unwatched_poll_interval.is_none());
        let on = plain.with_public_url("https://gen.example".into(), Duration::from_secs(60));
        assert!(on.gateway.upstream_notifies, "waiters announce themselves");
        assert_eq!(on.driver.unwatched_poll_interval, Some(Duration::from_secs(60)));
        assert_eq!(on.http.public_url.as_deref(), Some("https://gen.example"), "links are rooted there");
    }
}
