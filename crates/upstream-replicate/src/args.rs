//! The Replicate adapter's flags and variables, flattened into the binary's command line.

use clap::Args;

use crate::{DEFAULT_BASE_URL, ReplicateConfig, WebhookConfig};

/// Where Replicate's API is, the token it is called with, and the secret of its webhooks.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct ReplicateArgs {
    /// Base URL of Replicate's API.
    #[arg(long, env = "GENJOBS_REPLICATE_URL", default_value = DEFAULT_BASE_URL, help_heading = "Upstream")]
    pub replicate_url: String,
    /// Sent to Replicate as `Authorization: Bearer <value>`; set, the models' replicate routes run
    /// there.
    #[arg(long, env = "GENJOBS_REPLICATE_TOKEN", hide_env_values = true, help_heading = "Upstream")]
    pub replicate_token: Option<String>,
    /// Verifies Replicate's webhooks (`whsec_…`); with GENJOBS_PUBLIC_URL, predictions ask for
    /// them.
    #[arg(
        long,
        env = "GENJOBS_REPLICATE_WEBHOOK_SECRET",
        hide_env_values = true,
        help_heading = "Webhooks and stored outputs"
    )]
    pub replicate_webhook_secret: Option<String>,
}

impl Default for ReplicateArgs {
    fn default() -> Self {
        Self { replicate_url: DEFAULT_BASE_URL.to_owned(), replicate_token: None, replicate_webhook_secret: None }
    }
}

impl ReplicateArgs {
    /// The adapter's configuration, `None` when no token is set (Replicate is not configured);
    /// webhooks when the service has a public URL and the secret is set.
    #[must_use]
    pub fn config(&self, public_url: Option<&str>) -> Option<ReplicateConfig> {
        let token = self.replicate_token.clone()?;
        let webhook = public_url
            .zip(self.replicate_webhook_secret.as_deref())
            .map(|(public_url, secret)| WebhookConfig::new(public_url, secret));
        Some(ReplicateConfig { webhook, ..ReplicateConfig::new(self.replicate_url.clone(), token) })
    }
}
