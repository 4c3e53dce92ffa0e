//! The caller's account, ledger and usage; and the operators' users, keys and grants.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::schemas::timestamp_schema;

/// The caller's account (`GET /api/v1/account`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Account {
    /// The caller.
    pub user_id: String,
    /// Free to spend.
    pub credits_available: u64,
    /// Held for jobs not yet final.
    pub credits_held: u64,
    /// Spent on succeeded jobs.
    pub credits_spent: u64,
    /// Requests per minute.
    pub rate_limit_per_minute: u32,
    /// Jobs not yet final at once.
    pub max_concurrent_jobs: u32,
    /// Jobs not yet final now.
    pub active_jobs: u32,
}

/// A user as operators see it (`GET /api/admin/users/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct User {
    /// The user.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Free to spend.
    pub credits_available: u64,
    /// Held for jobs not yet final.
    pub credits_held: u64,
    /// Spent on succeeded jobs.
    pub credits_spent: u64,
    /// Requests per minute.
    pub rate_limit_per_minute: u32,
    /// Jobs not yet final at once.
    pub max_concurrent_jobs: u32,
    /// Jobs not yet final now.
    pub active_jobs: u32,
    /// The price tier: jobs cost the catalog's price times this percent, rounded up per job.
    pub price_percent: u32,
    /// When the user was created.
    #[schema(schema_with = timestamp_schema)]
    pub created_at: String,
}

/// A page of users, newest first (`GET /api/admin/users`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserPage {
    /// The users.
    pub data: Vec<User>,
    /// The `before` of the next page, or null.
    pub next: Option<String>,
}

/// The body of `PATCH /api/admin/users/{id}`: each field optional, a field left out unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserPatch {
    /// Requests per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub rate_limit_per_minute: Option<u64>,
    /// Jobs not yet final at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub max_concurrent_jobs: Option<u64>,
    /// The price tier, 1 to 1,000 percent of the catalog's price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000)]
    pub price_percent: Option<u64>,
}

/// The body of `POST /api/admin/users`. `name` and `credits` are required: the edge refuses a
/// body without them, naming the field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    /// Display name.
    #[schema(required = true, value_type = String, min_length = 1, max_length = 200)]
    pub name: Option<String>,
    /// Opening grant.
    #[schema(required = true, value_type = u64)]
    pub credits: Option<u64>,
    /// Request rate limit; the service's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub rate_limit_per_minute: Option<u64>,
    /// Concurrent-job limit; the service's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub max_concurrent_jobs: Option<u64>,
    /// Price tier, 1 to 1,000 percent of the catalog's price; 100 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000)]
    pub price_percent: Option<u64>,
}

/// A user just created, with its key shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreatedUser {
    /// The user.
    pub id: String,
    /// Display name.
    pub name: String,
    /// The user's first API key.
    pub api_key: String,
    /// The opening grant.
    pub credits_available: u64,
    /// Requests per minute.
    pub rate_limit_per_minute: u32,
    /// Jobs not yet final at once.
    pub max_concurrent_jobs: u32,
}

/// The body of `POST /api/admin/users/{id}/credits`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Credits to add; negative to take away. Required, and not zero.
    #[schema(required = true, value_type = i64)]
    pub amount: Option<i64>,
}

/// One credit movement of the caller's ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LedgerEntry {
    /// The entry's id, increasing with time.
    pub id: String,
    /// When it was recorded.
    #[schema(schema_with = timestamp_schema)]
    pub created_at: String,
    /// `grant`, `hold`, `release` or `charge`.
    pub kind: String,
    /// The job it belongs to; null for grants.
    pub job_id: Option<String>,
    /// Credits moved; negative only for a negative grant.
    pub credits: i64,
}

/// A page of the caller's ledger, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LedgerPage {
    /// The entries.
    pub data: Vec<LedgerEntry>,
    /// The `before` of the next page, or null.
    pub next: Option<String>,
}

/// A field that is present, null or not: absent fields stay `None` through `default`.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

/// One group of a usage report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UsageRow {
    /// The UTC day (`YYYY-MM-DD`), when grouped by day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// The model, when grouped by model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The user, when grouped by user (operators' report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The provider that took the jobs, when grouped by provider (operators' report); null for the
    /// jobs no provider took.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub provider: Option<Option<String>>,
    /// The key prefix the jobs were submitted with, when grouped by key; null for jobs of no
    /// recorded key.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub key: Option<Option<String>>,
    /// Jobs created in the group.
    pub jobs: u64,
    /// Of which succeeded.
    pub succeeded: u64,
    /// Of which failed.
    pub failed: u64,
    /// Of which were canceled.
    pub canceled: u64,
    /// Credits charged for them.
    pub credits_spent: u64,
    /// The provider key the jobs were sent with (its last 4 characters), when grouped by
    /// provider key (operators' report); null for jobs of no known provider key.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub provider_key: Option<Option<String>>,
    /// What the providers billed the operator for the jobs, in US dollars, a decimal string
    /// (operators' report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "1.24")]
    pub provider_cost_usd: Option<String>,
    /// What the credits spent are worth: `credits_spent` × `GENJOBS_CREDIT_USD`, a decimal
    /// string (operators' report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "1.6")]
    pub revenue_usd: Option<String>,
    /// `revenue_usd` − `provider_cost_usd`, a decimal string, negative at a loss (operators'
    /// report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "0.36")]
    pub margin_usd: Option<String>,
    /// Of the failed, those that failed `CONTENT_REFUSED` (flagged by moderation, or refused by a
    /// provider's content policy).
    #[serde(default)]
    pub content_refused: u64,
}
