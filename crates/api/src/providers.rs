//! What operators see of the providers' capacity (`GET /api/admin/providers`): each provider's
//! keys with their jobs in flight and caps, and the jobs waiting for a slot.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One provider: `{provider, keys, waiting}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProviderCapacity {
    /// The provider's name (`fal`, `replicate`).
    pub provider: String,
    /// Each key, in the configured order; empty for a provider of one key and no cap, whose jobs
    /// take no slot.
    pub keys: Vec<KeyCapacity>,
    /// The jobs waiting, unsent, for a slot, by priority.
    pub waiting: WaitingCount,
}

/// One key of a provider: `{key_hint, in_flight, max_in_flight}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KeyCapacity {
    /// The key's last 4 characters.
    pub key_hint: String,
    /// Its jobs sent and not final.
    pub in_flight: u64,
    /// Its cap of jobs in flight; 0 means none.
    pub max_in_flight: u32,
}

/// The jobs waiting for a slot: `{normal, low}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WaitingCount {
    /// Normal jobs waiting.
    pub normal: u64,
    /// Low jobs waiting (sent only while no normal job waits).
    pub low: u64,
}
