//! The fal adapter's flags and variables, flattened into the binary's command line.

use std::path::PathBuf;

use clap::Args;

/// Where fal's queue is, the key it is called with, where its webhooks' keys are published, and
/// the operator's endpoint schemas.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct FalArgs {
    /// Base URL of a fal-protocol queue; unset means the built-in simulator.
    #[arg(long, env = "GENJOBS_UPSTREAM_URL", help_heading = "Upstream")]
    pub upstream_url: Option<String>,
    /// Sent upstream as `Authorization: Key <value>`. Several keys, separated by commas, share
    /// the jobs: each new job goes on the one with the fewest in flight.
    #[arg(long, env = "GENJOBS_UPSTREAM_KEY", hide_env_values = true, help_heading = "Upstream")]
    pub upstream_key: Option<String>,
    /// Most jobs sent with one fal key and not yet final, across every replica (what the account
    /// runs at once); more wait, queued, for a slot. 0 means no cap.
    #[arg(
        long,
        env = "GENJOBS_UPSTREAM_MAX_IN_FLIGHT",
        default_value_t = 0,
        allow_negative_numbers = true,
        help_heading = "Upstream"
    )]
    pub upstream_max_in_flight: i64,
    /// Path to a file of fal endpoint schemas ({"endpoints": {...}}, as `genjobs models import fal
    /// --online --schemas FILE` writes it) added to those shipped, so that models may route to
    /// those endpoints.
    #[arg(long, env = "GENJOBS_FAL_SCHEMAS", help_heading = "Jobs")]
    pub fal_schemas: Option<PathBuf>,
    /// Where fal's webhook signing keys are published [default: fal's, or the built-in simulator's].
    #[arg(long, env = "GENJOBS_FAL_JWKS_URL", help_heading = "Webhooks and stored outputs")]
    pub fal_jwks_url: Option<String>,
    /// The operator's fal user id: fal's webhooks signed for another account are refused
    /// [default: any account's].
    #[arg(long, env = "GENJOBS_FAL_USER_ID", help_heading = "Webhooks and stored outputs")]
    pub fal_user_id: Option<String>,
}
