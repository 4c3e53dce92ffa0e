//! Configuration from the environment: the contract's table, every variable optional.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The service's configuration.
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
    /// `GENJOBS_UPSTREAM_CANCEL=1`: also ask the provider to stop canceled jobs.
    pub upstream_cancel: bool,
    /// `GENJOBS_POLL_INTERVAL_MS`.
    pub poll_interval: Duration,
    /// `GENJOBS_STREAM_MAX_SECS`.
    pub stream_max: Duration,
    /// `GENJOBS_SSE_KEEPALIVE_SECS`: interval of `: keep-alive` comments (at most 15).
    pub sse_keep_alive: Duration,
    /// `GENJOBS_JOB_TIMEOUT_SECS`.
    pub job_timeout: Duration,
    /// `GENJOBS_MODELS`.
    pub models_path: Option<PathBuf>,
    /// `GENJOBS_DEFAULT_RATE_LIMIT_PER_MINUTE`.
    pub default_rate_limit_per_minute: u32,
    /// `GENJOBS_DEFAULT_MAX_CONCURRENT_JOBS`.
    pub default_max_concurrent_jobs: u32,
    /// `GENJOBS_DEMO_CREDITS`.
    pub demo_credits: u64,
    /// Connections of the database pool (`GENJOBS_DB_POOL_SIZE`).
    pub db_pool_size: usize,
    /// Wait for a free connection before answering 503 (`GENJOBS_DB_POOL_TIMEOUT_MS`).
    pub db_pool_timeout: Duration,
    /// Time allowed to connect (`GENJOBS_DB_CONNECT_TIMEOUT_MS`).
    pub db_connect_timeout: Duration,
    /// `statement_timeout` of every connection (`GENJOBS_DB_STATEMENT_TIMEOUT_MS`).
    pub db_statement_timeout: Duration,
    /// How long a looked-up API key is trusted (`GENJOBS_KEY_CACHE_SECS`).
    pub key_cache_ttl: Duration,
    /// HTTP worker threads (`GENJOBS_HTTP_WORKERS`); one per core when unset.
    pub http_workers: Option<usize>,
    /// How long a read job is served from memory on Postgres (`GENJOBS_JOB_CACHE_MS`).
    pub job_cache_ttl: Duration,
    /// How long a driver keeps a claimed job before another may take it over (`GENJOBS_LEASE_SECS`).
    pub lease: Duration,
    /// Queue time of the built-in simulator (`GENJOBS_SIM_QUEUE_MS`).
    pub sim_queue: Duration,
    /// Run time of the built-in simulator (`GENJOBS_SIM_RUN_MS`).
    pub sim_run: Duration,
}

/// A variable that is set but cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{name}={value:?} is not valid: {expected}")]
pub struct ConfigError {
    name: &'static str,
    value: String,
    expected: &'static str,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: None,
            admin_token: None,
            upstream_url: None,
            upstream_key: None,
            upstream_cancel: false,
            poll_interval: Duration::from_millis(2000),
            stream_max: Duration::from_secs(60),
            sse_keep_alive: Duration::from_secs(10),
            job_timeout: Duration::from_secs(1800),
            models_path: None,
            default_rate_limit_per_minute: 120,
            default_max_concurrent_jobs: 8,
            demo_credits: 1000,
            db_pool_size: 16,
            db_pool_timeout: Duration::from_secs(2),
            db_connect_timeout: Duration::from_secs(5),
            db_statement_timeout: Duration::from_secs(5),
            key_cache_ttl: Duration::from_secs(5),
            job_cache_ttl: Duration::from_millis(500),
            http_workers: None,
            lease: Duration::from_secs(20),
            sim_queue: Duration::from_millis(500),
            sim_run: Duration::from_secs(6),
        }
    }
}

impl Config {
    /// Reads the process environment.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first variable that is set to something unusable.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Reads variables through `lookup`, so that tests need not touch the process environment.
    ///
    /// # Errors
    /// As [`Config::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let d = Config::default();
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
        let bind = match lookup("GENJOBS_BIND") {
            Some(value) => {
                value.parse().map_err(|_| ConfigError { name: "GENJOBS_BIND", value, expected: "host:port" })?
            }
            None => d.bind,
        };
        Ok(Config {
            bind,
            database_url: lookup("DATABASE_URL"),
            admin_token: lookup("GENJOBS_ADMIN_TOKEN"),
            upstream_url: lookup("GENJOBS_UPSTREAM_URL"),
            upstream_key: lookup("GENJOBS_UPSTREAM_KEY"),
            upstream_cancel: matches!(lookup("GENJOBS_UPSTREAM_CANCEL").as_deref(), Some("1" | "true" | "yes")),
            poll_interval: positive("GENJOBS_POLL_INTERVAL_MS")?.map_or(d.poll_interval, Duration::from_millis),
            stream_max: positive("GENJOBS_STREAM_MAX_SECS")?.map_or(d.stream_max, Duration::from_secs),
            sse_keep_alive: positive("GENJOBS_SSE_KEEPALIVE_SECS")?
                .map_or(d.sse_keep_alive, |s| Duration::from_secs(s.min(15))),
            job_timeout: positive("GENJOBS_JOB_TIMEOUT_SECS")?.map_or(d.job_timeout, Duration::from_secs),
            models_path: lookup("GENJOBS_MODELS").map(PathBuf::from),
            default_rate_limit_per_minute: small("GENJOBS_DEFAULT_RATE_LIMIT_PER_MINUTE")?
                .unwrap_or(d.default_rate_limit_per_minute),
            default_max_concurrent_jobs: small("GENJOBS_DEFAULT_MAX_CONCURRENT_JOBS")?
                .unwrap_or(d.default_max_concurrent_jobs),
            demo_credits: parse("GENJOBS_DEMO_CREDITS", "a non-negative integer")?.unwrap_or(d.demo_credits),
            db_pool_size: positive("GENJOBS_DB_POOL_SIZE")?.map_or(d.db_pool_size, |v| v as usize),
            db_pool_timeout: positive("GENJOBS_DB_POOL_TIMEOUT_MS")?.map_or(d.db_pool_timeout, Duration::from_millis),
            db_connect_timeout: positive("GENJOBS_DB_CONNECT_TIMEOUT_MS")?
                .map_or(d.db_connect_timeout, Duration::from_millis),
            db_statement_timeout: positive("GENJOBS_DB_STATEMENT_TIMEOUT_MS")?
                .map_or(d.db_statement_timeout, Duration::from_millis),
            key_cache_ttl: parse("GENJOBS_KEY_CACHE_SECS", "seconds")?.map_or(d.key_cache_ttl, Duration::from_secs),
            http_workers: positive("GENJOBS_HTTP_WORKERS")?.map(|v| v as usize),
            job_cache_ttl: parse("GENJOBS_JOB_CACHE_MS", "milliseconds")?
                .map_or(d.job_cache_ttl, Duration::from_millis),
            lease: positive("GENJOBS_LEASE_SECS")?.map_or(d.lease, Duration::from_secs),
            sim_queue: parse("GENJOBS_SIM_QUEUE_MS", "milliseconds")?.map_or(d.sim_queue, Duration::from_millis),
            sim_run: parse("GENJOBS_SIM_RUN_MS", "milliseconds")?.map_or(d.sim_run, Duration::from_millis),
        })
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
        assert_eq!(c.poll_interval, Duration::from_millis(2000));
        assert_eq!(c.stream_max, Duration::from_secs(60));
        assert_eq!(c.job_timeout, Duration::from_secs(1800));
        assert_eq!((c.default_rate_limit_per_minute, c.default_max_concurrent_jobs, c.demo_credits), (120, 8, 1000));
        assert!(c.database_url.is_none() && c.upstream_url.is_none() && c.admin_token.is_none());
    }

    #[test]
    fn variables_override_and_bad_values_are_named() {
        let c = config(&[("GENJOBS_POLL_INTERVAL_MS", "50"), ("GENJOBS_UPSTREAM_CANCEL", "1")]).unwrap();
        assert_eq!(c.poll_interval, Duration::from_millis(50));
        assert!(c.upstream_cancel);
        let err = config(&[("GENJOBS_STREAM_MAX_SECS", "soon")]).unwrap_err();
        assert!(err.to_string().contains("GENJOBS_STREAM_MAX_SECS"));
        assert!(config(&[("GENJOBS_POLL_INTERVAL_MS", "0")]).is_err());
        assert!(config(&[("GENJOBS_BIND", "nowhere")]).is_err());
    }
}
