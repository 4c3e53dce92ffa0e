//! Client webhooks' flags and variables, flattened into the binary's command line.

use clap::Args;

use crate::TransportSettings;

/// Where webhooks may go, and the key their secrets are sealed with.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct ClientWebhookArgs {
    /// Let clients' webhook URLs point at addresses that are not global unicast (loopback,
    /// private, link-local, reserved).
    #[arg(long, env = "GENJOBS_WEBHOOK_ALLOW_PRIVATE", help_heading = "Webhooks and stored outputs",
        value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub webhook_allow_private: bool,
    /// Key that encrypts users' webhook secrets at rest [default: a random key made at the first
    /// start and kept with the store].
    #[arg(long, env = "GENJOBS_SECRET_KEY", hide_env_values = true, help_heading = "Webhooks and stored outputs")]
    pub secret_key: Option<String>,
}

impl ClientWebhookArgs {
    /// The transport these flags describe, the default timeout per attempt.
    #[must_use]
    pub fn transport_settings(&self) -> TransportSettings {
        TransportSettings { allow_private: self.webhook_allow_private, ..TransportSettings::default() }
    }
}
