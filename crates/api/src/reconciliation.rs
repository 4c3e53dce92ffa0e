//! The reconciliation of providers' bills: per day and provider key, the figures to hold against
//! a provider's invoice, and the jobs whose provider reported more units than they were charged
//! for.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One day of one provider key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReconciliationDay {
    /// The UTC day the jobs were created, `YYYY-MM-DD`.
    #[schema(example = "2026-11-30")]
    pub day: String,
    /// The provider.
    #[schema(example = "fal")]
    pub provider: String,
    /// The provider key's last 4 characters; null for jobs of no known key.
    pub key_hint: Option<String>,
    /// Jobs billed (final, on routes with a `cost`).
    pub jobs: u64,
    /// Units billed, a decimal string.
    #[schema(example = "412")]
    pub units: String,
    /// What they cost, in US dollars, a decimal string.
    #[schema(example = "16.48")]
    pub cost_usd: String,
}

/// A job whose provider reported more units than the job was charged for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UnitsMismatch {
    /// The job.
    pub job_id: String,
    /// Its model.
    pub model: String,
    /// Units the user paid for, a decimal string.
    #[schema(example = "2")]
    pub units_charged: String,
    /// Units the provider reported, a decimal string.
    #[schema(example = "4")]
    pub units_reported: String,
}

/// `GET /api/admin/reconciliation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Reconciliation {
    /// Per day, provider and key.
    pub data: Vec<ReconciliationDay>,
    /// The jobs billed more units than charged, oldest first (at most 1,000).
    pub mismatches: Vec<UnitsMismatch>,
}
