//! Every user's jobs as operators see them: the job resource and who and what stands behind it,
//! pages of them, and one job with the body it was received with, its ledger and its webhooks.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::account::LedgerEntry;
use crate::client_webhooks::WebhookDelivery;
use crate::jobs::Job;

/// A job as `GET /api/admin/jobs` lists it: the job resource plus its owner and the provider's
/// own id of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdminJob {
    /// The job as its owner sees it.
    #[serde(flatten)]
    pub job: Job,
    /// Its owner.
    pub user_id: String,
    /// The provider's id of the job (its request id); null until it is sent.
    pub upstream_request_id: Option<String>,
    /// The prefix of the key it was submitted with; null for jobs from before keys were recorded.
    pub key_prefix: Option<String>,
    /// `normal` or `low`: how soon it goes to its provider when slots are scarce.
    #[schema(example = "normal")]
    pub priority: String,
}

/// A page of every user's jobs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdminJobPage {
    /// The jobs.
    pub data: Vec<AdminJob>,
    /// The `before` of the next page, or null.
    pub next: Option<String>,
}

/// One job as `GET /api/admin/jobs/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdminJobDetail {
    /// The job as the listing shows it.
    #[serde(flatten)]
    pub job: AdminJob,
    /// The JSON object the submission was received with, no default filled in (for a form, its
    /// fields, each image named by its SHA-256); null for a job accepted before bodies were kept.
    #[schema(value_type = Option<Object>)]
    pub request: Option<Map<String, Value>>,
    /// What its moderation check found: `passed`, `flagged`, `unavailable`, or `unchecked` (sent
    /// without a check, the service being unavailable and moderation failing open); null when it
    /// was not checked (yet).
    pub moderation: Option<String>,
    /// Its ledger entries, oldest first.
    pub ledger: Vec<LedgerEntry>,
    /// Its client webhook events with their attempts, as its owner reads them
    /// (`GET /api/v1/jobs/{id}/webhooks`); empty when it has none.
    pub webhooks: Vec<WebhookDelivery>,
    /// The units its provider billed, a decimal string (its report, else what was delivered, in
    /// the unit of its route's `cost`); null until final, and for a route without a cost.
    #[schema(example = "2")]
    pub provider_units: Option<String>,
    /// What its provider billed the operator in US dollars, a decimal string (`provider_units`
    /// × the route's `cost.usd`); null until final, and for a route without a cost.
    #[schema(example = "0.08")]
    pub provider_cost_usd: Option<String>,
}
