//! Configuration from the environment: the contract's table, every variable optional.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use genjobs_domain::usecases::{DriverSettings, Settings};
use genjobs_http::HttpSettings;
use genjobs_store_postgres::PgSettings;
use genjobs_upstream_sim::SimConfig;

/// The service's configuration: the wiring choices of the binary, and each adapter's own
/// settings, whose defaults live with the adapter (the domain's [`Settings`] and
/// [`DriverSettings`], [`HttpSettings`], [`PgSettings`], [`SimConfig`]).
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
    /// `GENJOBS_UPSTREAM_KEY`.
    pub upstream_key: Option<String>,
    /// `GENJOBS_MODELS`.
    pub models_path: Option<PathBuf>,
    /// `GENJOBS_DEMO_CREDITS`.
    pub demo_credits: u64,
    /// The use cases: poll interval, default limits, `GENJOBS_UPSTREAM_CANCEL`.
    pub gateway: Settings,
    /// The job driver: `GENJOBS_JOB_TIMEOUT_SECS`, `GENJOBS_LEASE_SECS`, and the poll interval.
    pub driver: DriverSettings,
    /// The HTTP edge: SSE lifetime and keep-alive, worker threads.
    pub http: HttpSettings,
    /// Postgres (its `url` is `database_url`): pool, timeouts, caches.
    pub postgres: PgSettings,
    /// The built-in simulator: `GENJOBS_SIM_QUEUE_MS`, `GENJOBS_SIM_RUN_MS`.
    pub simulator: SimConfig,
}

/// A variable that is set but cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{name}={value:?} is not valid: {expected}")]
pub struct ConfigError {
    name: &'static str,
    value: String,
    expected: &'static str,
}

/// Most seconds between two `: keep-alive` comments (the contract's "at least every 15 s").
const MAX_KEEP_ALIVE: Duration = Duration::from_secs(15);

impl Default for Config {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: None,
            admin_token: None,
            upstream_url: None,
            upstream_key: None,
            models_path: None,
            demo_credits: 1000,
            gateway: Settings::default(),
            driver: DriverSettings::default(),
            http: HttpSettings::default(),
            postgres: PgSettings::default(),
            simulator: SimConfig::default(),
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

    /// Reads the process environment.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first variable that is set to something unusable.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Reads variables through `lookup`, so that tests need not touch the process environment.
    /// Every variable left unset keeps its adapter's default.
    ///
    /// # Errors
    /// As [`Config::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let parse = |name: &'static str, expected: &'static str| -> Result<Option<u64>, ConfigError> {
            lookup(name)
                .map(|value| value.trim().parse::<u64>().map_err(|_| ConfigError { name, value, expected }))
                .transpose()
        };
        let positive = |name: &'static str| -> Result<Option<u64>, ConfigError> {
            match parse(name, "a positive integer")? {
                Some(0) => Err(ConfigError { name, value: "0".into(), expected: "a positive integer" }),
                other => Ok(other),
            }
        };
        let small = |name: &'static str| -> Result<Option<u32>, ConfigError> {
            positive(name)?
                .map(|v| {
                    u32::try_from(v).map_err(|_| ConfigError {
                        name,
                        value: v.to_string(),
                        expected: "at most 4294967295",
                    })
                })
                .transpose()
        };
        let millis = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_millis);
        let secs = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_secs);

        let mut c = Config::default();
        if let Some(value) = lookup("GENJOBS_BIND") {
            c.bind = value.parse().map_err(|_| ConfigError { name: "GENJOBS_BIND", value, expected: "host:port" })?;
        }
        c.database_url = lookup("DATABASE_URL");
        c.admin_token = lookup("GENJOBS_ADMIN_TOKEN");
        c.upstream_url = lookup("GENJOBS_UPSTREAM_URL");
        c.upstream_key = lookup("GENJOBS_UPSTREAM_KEY");
        c.models_path = lookup("GENJOBS_MODELS").map(PathBuf::from);
        c.demo_credits = parse("GENJOBS_DEMO_CREDITS", "a non-negative integer")?.unwrap_or(c.demo_credits);
        if let Some(ms) = positive("GENJOBS_POLL_INTERVAL_MS")? {
            c = c.with_poll_interval(Duration::from_millis(ms));
        }

        let g = &mut c.gateway;
        g.upstream_cancel = matches!(lookup("GENJOBS_UPSTREAM_CANCEL").as_deref(), Some("1" | "true" | "yes"));
        let limits = &mut g.default_limits;
        limits.rate_limit_per_minute =
            small("GENJOBS_DEFAULT_RATE_LIMIT_PER_MINUTE")?.unwrap_or(limits.rate_limit_per_minute);
        limits.max_concurrent_jobs =
            small("GENJOBS_DEFAULT_MAX_CONCURRENT_JOBS")?.unwrap_or(limits.max_concurrent_jobs);

        let d = &mut c.driver;
        d.job_timeout = secs(positive("GENJOBS_JOB_TIMEOUT_SECS")?, d.job_timeout);
        d.lease = secs(positive("GENJOBS_LEASE_SECS")?, d.lease);

        let h = &mut c.http;
        h.stream_max = secs(positive("GENJOBS_STREAM_MAX_SECS")?, h.stream_max);
        h.keep_alive = secs(positive("GENJOBS_SSE_KEEPALIVE_SECS")?, h.keep_alive).min(MAX_KEEP_ALIVE);
        h.workers = positive("GENJOBS_HTTP_WORKERS")?.map(|v| v as usize).or(h.workers);

        let p = &mut c.postgres;
        p.pool_size = positive("GENJOBS_DB_POOL_SIZE")?.map_or(p.pool_size, |v| v as usize);
        p.pool_timeout = millis(positive("GENJOBS_DB_POOL_TIMEOUT_MS")?, p.pool_timeout);
        p.connect_timeout = millis(positive("GENJOBS_DB_CONNECT_TIMEOUT_MS")?, p.connect_timeout);
        p.statement_timeout = millis(positive("GENJOBS_DB_STATEMENT_TIMEOUT_MS")?, p.statement_timeout);
        p.key_cache_ttl = secs(parse("GENJOBS_KEY_CACHE_SECS", "seconds")?, p.key_cache_ttl);
        p.job_cache_ttl = millis(parse("GENJOBS_JOB_CACHE_MS", "milliseconds")?, p.job_cache_ttl);

        let s = &mut c.simulator;
        s.queue = millis(parse("GENJOBS_SIM_QUEUE_MS", "milliseconds")?, s.queue);
        s.run = millis(parse("GENJOBS_SIM_RUN_MS", "milliseconds")?, s.run);
        Ok(c)
    }

    /// The Postgres settings with `database_url`, when there is one.
    #[must_use]
    pub fn postgres_settings(&self) -> Option<PgSettings> {
        self.database_url.as_ref().map(|url| PgSettings { url: url.clone(), ..self.postgres.clone() })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Config::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn defaults_follow_the_contract() {
        let c = config(&[]).unwrap();
        assert_eq!(c.bind.to_string(), "127.0.0.1:8080");
        assert_eq!((c.gateway.poll_interval, c.driver.poll_interval), (Duration::from_secs(2), Duration::from_secs(2)));
        assert_eq!(c.http.stream_max, Duration::from_secs(60));
        assert_eq!(c.driver.job_timeout, Duration::from_secs(1800));
        let limits = c.gateway.default_limits;
        assert_eq!((limits.rate_limit_per_minute, limits.max_concurrent_jobs, c.demo_credits), (120, 8, 1000));
        assert!(c.database_url.is_none() && c.upstream_url.is_none() && c.admin_token.is_none());
    }

    #[test]
    fn variables_override_and_bad_values_are_named() {
        let c = config(&[("GENJOBS_POLL_INTERVAL_MS", "50"), ("GENJOBS_UPSTREAM_CANCEL", "1")]).unwrap();
        assert_eq!(
            (c.gateway.poll_interval, c.driver.poll_interval),
            (Duration::from_millis(50), Duration::from_millis(50))
        );
        assert!(c.gateway.upstream_cancel);
        assert_eq!(config(&[("GENJOBS_SSE_KEEPALIVE_SECS", "60")]).unwrap().http.keep_alive, MAX_KEEP_ALIVE);
        let err = config(&[("GENJOBS_STREAM_MAX_SECS", "soon")]).unwrap_err();
        assert!(err.to_string().contains("GENJOBS_STREAM_MAX_SECS"));
        assert!(config(&[("GENJOBS_POLL_INTERVAL_MS", "0")]).is_err());
        assert!(config(&[("GENJOBS_BIND", "nowhere")]).is_err());
    }
}
