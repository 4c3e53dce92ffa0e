//! The output store's flags and variables, flattened into the binary's command line.

use clap::Args;

use crate::{DEFAULT_MAX_BYTES, DEFAULT_OUTPUT_HOSTS};

/// Where outputs are copied, how large they may be, and where they may be read from.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct OutputStoreArgs {
    /// Where outputs are copied: memory://, file:///path, s3://bucket/prefix, or none
    /// [default: memory:// with the in-memory store, none with Postgres].
    #[arg(long, env = "GENJOBS_OUTPUT_STORE", help_heading = "Webhooks and stored outputs")]
    pub output_store: Option<String>,
    /// The largest output copied; a larger one keeps the provider's URL.
    #[arg(long, env = "GENJOBS_OUTPUT_MAX_BYTES", default_value_t = DEFAULT_MAX_BYTES,
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Webhooks and stored outputs")]
    pub output_max_bytes: u64,
    /// The media hosts outputs are read from, comma-separated, each with its subdomains; the
    /// configured provider's own host is always read, even on loopback.
    #[arg(long, env = "GENJOBS_OUTPUT_HOSTS", value_delimiter = ',',
        default_values_t = DEFAULT_OUTPUT_HOSTS.iter().map(|h| (*h).to_owned()),
        help_heading = "Webhooks and stored outputs")]
    pub output_hosts: Vec<String>,
}
