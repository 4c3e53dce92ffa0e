//! API keys with settings: the bodies that issue and change them, and a key as its listing
//! shows it (never the key itself, which only its issue shows).

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::schemas::{nullable_timestamp_schema, timestamp_schema};

/// A key's budget as a request sets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetBody {
    /// Credits the key may hold plus spend per period.
    pub credits: u64,
    /// `day`, `week`, `month` (UTC; weeks from Monday) or `total`.
    #[schema(example = "day")]
    pub period: String,
}

/// The body of `POST /api/admin/users/{id}/keys` and `POST /api/v1/account/keys`; every field
/// optional, an empty body (or none) issuing a key without restrictions of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// A name for the people who manage it.
    #[serde(default)]
    pub name: Option<String>,
    /// The model ids it may use; all when absent.
    #[serde(default)]
    pub models: Option<Vec<String>>,
    /// What it may spend per period.
    #[serde(default)]
    pub budget: Option<BudgetBody>,
    /// When it stops working (RFC 3339); may be in the past.
    #[serde(default)]
    #[schema(schema_with = nullable_timestamp_schema)]
    pub expires_at: Option<String>,
    /// Requests per minute, in addition to its user's limit.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub rate_limit_per_minute: Option<u64>,
    /// Jobs not yet final at once, in addition to its user's limit.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub max_concurrent_jobs: Option<u64>,
}

/// Reads a field that may be absent (outer `None`), `null` (`Some(None)`) or a value.
#[allow(clippy::option_option, reason = "absent and null are different requests")]
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The body of `PATCH /api/admin/keys/{prefix}`: a field left out stays as it is, `null`
/// removes it, a value sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(clippy::option_option, reason = "absent and null are different requests")]
pub struct KeyPatch {
    /// A name for the people who manage it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub name: Option<Option<String>>,
    /// The model ids it may use.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    pub models: Option<Option<Vec<String>>>,
    /// What it may spend per period.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<BudgetBody>)]
    pub budget: Option<Option<BudgetBody>>,
    /// When it stops working (RFC 3339).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Option<String>>,
    /// Requests per minute, in addition to its user's limit.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>, minimum = 1)]
    pub rate_limit_per_minute: Option<Option<u64>>,
    /// Jobs not yet final at once, in addition to its user's limit.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>, minimum = 1)]
    pub max_concurrent_jobs: Option<Option<u64>>,
}

/// A key's budget and where it stands in the current period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KeyBudgetView {
    /// Credits per period.
    pub credits: u64,
    /// `day`, `week`, `month` or `total`.
    pub period: String,
    /// Held plus charged in the current period (releases give back).
    pub used: u64,
    /// When `used` starts again from 0; null for `total`.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub resets_at: Option<String>,
}

/// A key as its listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KeyView {
    /// The key's public prefix, as used to change or revoke it.
    pub prefix: String,
    /// The prefix of the key that made it (with `POST /api/v1/account/keys`); null for a key an
    /// operator issued.
    pub parent: Option<String>,
    /// Its name.
    pub name: Option<String>,
    /// The models it may use; null for all.
    pub models: Option<Vec<String>>,
    /// Its budget; null for none.
    pub budget: Option<KeyBudgetView>,
    /// When it stops working.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub expires_at: Option<String>,
    /// Its own request rate limit.
    pub rate_limit_per_minute: Option<u32>,
    /// Its own concurrent-job limit.
    pub max_concurrent_jobs: Option<u32>,
    /// When it was issued.
    #[schema(schema_with = timestamp_schema)]
    pub created_at: String,
    /// When it was last let in, to within a minute; null before its first use.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub last_used_at: Option<String>,
    /// When it was revoked.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub revoked_at: Option<String>,
}

/// A key just issued: the key itself, shown this once, and its settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IssuedKey {
    /// The API key.
    pub api_key: String,
    /// The key's settings, as its listing shows them.
    #[serde(flatten)]
    pub key: KeyView,
}
