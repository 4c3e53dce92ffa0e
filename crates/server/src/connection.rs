//! Where the service is, who calls, and how to print: the flags every client command takes,
//! `keys` in both of its modes among them.

use clap::Args;

/// Where the service is, who calls, and how to print.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The service's base URL.
    #[arg(long, env = "GENJOBS_API_URL", default_value = "http://127.0.0.1:8080")]
    pub api_url: String,
    /// Your API key: the demo user's, printed at start, or one from `genjobs users create`.
    // Optional in the type only so that `genjobs models` can take the catalog subcommands, which
    // need none; clap still requires it everywhere else.
    #[arg(long, env = "GENJOBS_API_KEY", hide_env_values = true, required = true)]
    pub api_key: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
