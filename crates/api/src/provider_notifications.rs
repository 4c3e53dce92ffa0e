//! What the service answers a provider that notifies it of a job's end.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What the service answers a provider's webhook delivery
/// (`POST /api/upstream/{provider}/webhook`): what the delivery did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = WebhookReceipt)]
pub struct UpstreamWebhookReceipt {
    /// `applied`: the job ended with it; `already_final`: the job had ended (nothing changed);
    /// `ignored`: it reports nothing final.
    pub outcome: String,
}
