//! The answer of `POST /api/v1/uploads`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An uploaded image: a signed link to the service's copy, which any provider can fetch, to pass
/// among a job's `image_inputs` before it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Upload {
    /// The link, valid `GENJOBS_UPLOAD_TTL_SECS` (24 h by default) and readable without a key.
    pub url: String,
}
