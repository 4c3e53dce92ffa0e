//! The store's flags and variables, flattened into the binary's command line.

use std::time::Duration;

use clap::Args;

use crate::pool::{PgSettings, Pooler};

/// The Postgres settings but `DATABASE_URL`, which chooses the store and so belongs to the binary.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct PgArgs {
    /// What stands between DATABASE_URL and Postgres: `none`, or `transaction` for a pooler in
    /// transaction mode (PgBouncer's `pool_mode = transaction`).
    #[arg(long, env = "GENJOBS_DATABASE_POOLER", default_value = "none", help_heading = "Postgres")]
    pub database_pooler: Pooler,
    /// A direct Postgres URL for LISTEN/NOTIFY and migrations [default: DATABASE_URL].
    #[arg(long, env = "GENJOBS_DATABASE_LISTEN_URL", hide_env_values = true, help_heading = "Postgres")]
    pub database_listen_url: Option<String>,
    /// Postgres connections per process.
    #[arg(long, env = "GENJOBS_DB_POOL_SIZE", default_value_t = PgSettings::default().pool_size as u64,
        value_parser = clap::value_parser!(u64).range(1..10_000), help_heading = "Postgres")]
    pub db_pool_size: u64,
    /// Longest wait for a free pooled connection.
    #[arg(long, env = "GENJOBS_DB_POOL_TIMEOUT_MS", default_value_t = millis(PgSettings::default().pool_timeout),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Postgres")]
    pub db_pool_timeout_ms: u64,
    /// Longest wait to open a connection.
    #[arg(long, env = "GENJOBS_DB_CONNECT_TIMEOUT_MS", default_value_t = millis(PgSettings::default().connect_timeout),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Postgres")]
    pub db_connect_timeout_ms: u64,
    /// Deadline of every unit of work on the database, kept by the client (so through a pooler
    /// too): past it the request answers 503.
    #[arg(long, env = "GENJOBS_DB_STATEMENT_TIMEOUT_MS",
        default_value_t = millis(PgSettings::default().statement_timeout),
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Postgres")]
    pub db_statement_timeout_ms: u64,
    /// Lifetime of a cached API key look-up.
    #[arg(long, env = "GENJOBS_KEY_CACHE_SECS", default_value_t = PgSettings::default().key_cache_ttl.as_secs(),
        help_heading = "Postgres")]
    pub key_cache_secs: u64,
    /// Jobs kept in memory and read with no query; every change evicts them on every replica
    /// (0: none).
    #[arg(long, env = "GENJOBS_JOB_CACHE_ENTRIES", default_value_t = PgSettings::default().job_cache_entries as u64,
        help_heading = "Postgres")]
    pub job_cache_entries: u64,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl PgArgs {
    /// The settings these flags describe, with no URL yet: the binary adds `DATABASE_URL`.
    #[must_use]
    pub fn settings(self) -> PgSettings {
        PgSettings {
            pooler: self.database_pooler,
            listen_url: self.database_listen_url,
            pool_size: usize::try_from(self.db_pool_size).unwrap_or(usize::MAX),
            pool_timeout: Duration::from_millis(self.db_pool_timeout_ms),
            connect_timeout: Duration::from_millis(self.db_connect_timeout_ms),
            statement_timeout: Duration::from_millis(self.db_statement_timeout_ms),
            key_cache_ttl: Duration::from_secs(self.key_cache_secs),
            job_cache_entries: usize::try_from(self.job_cache_entries).unwrap_or(usize::MAX),
            ..PgSettings::default()
        }
    }
}
