//! The Replicate adapter's flags and variables, flattened into the binary's command line.

use clap::Args;
use genjobs_domain::capacity::{self, CapacitySettingError};

use crate::{DEFAULT_BASE_URL, ReplicateConfig, WebhookConfig};

/// Where Replicate's API is, the token it is called with, and the secret of its webhooks.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct ReplicateArgs {
    /// Base URL of Replicate's API.
    #[arg(long, env = "GENJOBS_REPLICATE_URL", default_value = DEFAULT_BASE_URL, help_heading = "Upstream")]
    pub replicate_url: String,
    /// Sent to Replicate as `Authorization: Bearer <value>`; set, the models' replicate routes run
    /// there. Several tokens, separated by commas, share the jobs: each new job goes on the one
    /// with the fewest in flight.
    #[arg(long, env = "GENJOBS_REPLICATE_TOKEN", hide_env_values = true, help_heading = "Upstream")]
    pub replicate_token: Option<String>,
    /// Most jobs sent with one Replicate token and not yet final, across every replica; more
    /// wait, queued, for a slot. 0 means no cap.
    #[arg(
        long,
        env = "GENJOBS_REPLICATE_MAX_IN_FLIGHT",
        default_value_t = 0,
        allow_negative_numbers = true,
        help_heading = "Upstream"
    )]
    pub replicate_max_in_flight: i64,
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
        Self {
            replicate_url: DEFAULT_BASE_URL.to_owned(),
            replicate_token: None,
            replicate_max_in_flight: 0,
            replicate_webhook_secret: None,
        }
    }
}

impl ReplicateArgs {
    /// The adapter's configuration, `None` when no token is set (Replicate is not configured);
    /// webhooks when the service has a public URL and the secret is set.
    ///
    /// # Errors
    /// [`CapacitySettingError`] naming the setting when a token of the list is empty or the cap
    /// is negative: the service refuses to start.
    pub fn config(&self, public_url: Option<&str>) -> Result<Option<ReplicateConfig>, CapacitySettingError> {
        let jobs_per_token = capacity::cap("GENJOBS_REPLICATE_MAX_IN_FLIGHT", self.replicate_max_in_flight)?;
        let Some(tokens) = self.replicate_token.as_deref() else { return Ok(None) };
        let tokens = capacity::key_list("GENJOBS_REPLICATE_TOKEN", tokens)?;
        let webhook = public_url
            .zip(self.replicate_webhook_secret.as_deref())
            .map(|(public_url, secret)| WebhookConfig::new(public_url, secret));
        Ok(Some(ReplicateConfig {
            webhook,
            tokens,
            jobs_per_token,
            ..ReplicateConfig::new(self.replicate_url.clone(), String::new())
        }))
    }
}
