//! The moderation adapter's flags and variables, flattened into the binary's command line.

use std::time::Duration;

use clap::Args;
use genjobs_domain::moderation::{DEFAULT_MODEL, DEFAULT_RETRY_WINDOW, ModerationSettings};
use url::Url;

/// Longest wait for one answer of the moderation service, by default.
const DEFAULT_TIMEOUT_SECS: u64 = 10;

/// Where the moderation service is, how it is called, and how its failures are borne.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct ModerationArgs {
    /// Base URL of an OpenAI-compatible moderation API (`POST {url}/moderations`), e.g.
    /// `https://api.openai.com/v1`, or `sim` for the built-in simulator's word list; set, every
    /// job's prompt and image inputs are checked before it is sent to any provider. Unset means
    /// no moderation.
    #[arg(long, env = "GENJOBS_MODERATION_URL", value_parser = moderation_url, help_heading = "Moderation")]
    pub moderation_url: Option<ModerationUrl>,
    /// Sent to the moderation API as `Authorization: Bearer <value>`.
    #[arg(long, env = "GENJOBS_MODERATION_KEY", hide_env_values = true, help_heading = "Moderation")]
    pub moderation_key: Option<String>,
    /// The moderation model asked for.
    #[arg(long, env = "GENJOBS_MODERATION_MODEL", default_value = DEFAULT_MODEL, help_heading = "Moderation")]
    pub moderation_model: String,
    /// Send a job unchecked, rather than fail it `MODERATION_UNAVAILABLE`, when the moderation
    /// service stays unreachable (or answers 5xx) for the whole retry window.
    #[arg(long, env = "GENJOBS_MODERATION_FAIL_OPEN", help_heading = "Moderation",
        value_parser = clap::builder::BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub moderation_fail_open: bool,
    /// How long after its acceptance a job's check is tried again while the moderation service
    /// cannot answer.
    #[arg(long, env = "GENJOBS_MODERATION_RETRY_WINDOW_SECS", default_value_t = DEFAULT_RETRY_WINDOW.as_secs(),
        help_heading = "Moderation")]
    pub moderation_retry_window_secs: u64,
    /// Longest wait for one answer of the moderation service.
    #[arg(long, env = "GENJOBS_MODERATION_TIMEOUT_SECS", default_value_t = DEFAULT_TIMEOUT_SECS,
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Moderation")]
    pub moderation_timeout_secs: u64,
}

/// Where the moderation service is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModerationUrl {
    /// The built-in simulator's `/moderations` (`sim`).
    Simulator,
    /// An OpenAI-compatible API at this base URL.
    At(Url),
}

impl Default for ModerationArgs {
    fn default() -> Self {
        Self {
            moderation_url: None,
            moderation_key: None,
            moderation_model: DEFAULT_MODEL.to_owned(),
            moderation_fail_open: false,
            moderation_retry_window_secs: DEFAULT_RETRY_WINDOW.as_secs(),
            moderation_timeout_secs: DEFAULT_TIMEOUT_SECS,
        }
    }
}

impl ModerationArgs {
    /// How the service's failures are borne.
    #[must_use]
    pub fn settings(&self) -> ModerationSettings {
        ModerationSettings {
            retry_window: Duration::from_secs(self.moderation_retry_window_secs),
            fail_open: self.moderation_fail_open,
        }
    }
}

/// `sim`, or an `http` or `https` URL with a host, which `/moderations` is appended to.
fn moderation_url(text: &str) -> Result<ModerationUrl, String> {
    if text.trim() == "sim" {
        return Ok(ModerationUrl::Simulator);
    }
    let url = Url::parse(text.trim()).map_err(|e| format!("neither `sim` nor a URL: {e}"))?;
    match (url.scheme(), url.host_str()) {
        ("http" | "https", Some(_)) => Ok(ModerationUrl::At(url)),
        _ => Err("`sim`, or an http or https URL with a host, is needed".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moderation_url_is_sim_or_http_with_a_host() {
        assert_eq!(moderation_url("sim"), Ok(ModerationUrl::Simulator));
        assert!(matches!(moderation_url("https://api.openai.com/v1"), Ok(ModerationUrl::At(_))));
        assert!(matches!(moderation_url("http://127.0.0.1:9000"), Ok(ModerationUrl::At(_))));
        assert!(moderation_url("ftp://example.com").is_err());
        assert!(moderation_url("not a url").is_err());
    }
}
