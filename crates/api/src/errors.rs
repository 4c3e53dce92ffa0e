//! The error envelope of every error response of the native API, for every status.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The error envelope of every error response: `{error: {type, code, message, param?}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorEnvelope {
    /// What went wrong.
    pub error: ErrorObject,
}

/// `{type, code, message, param?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorObject {
    /// The class of error, e.g. `invalid_request`, `unauthorized`, `rate_limited`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The precise error, e.g. `INVALID_REQUEST`, `NOT_ENOUGH_CREDITS`, `JOB_NOT_FOUND`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// The body field or parameter at fault, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
}
