//! [`FalRef`]: what the adapter keeps of a job at fal, as the job's opaque [`UpstreamRef`].

use genjobs_domain::job::UpstreamRef;
use serde::{Deserialize, Serialize};

/// Where a job lives at fal, kept as the job's opaque [`UpstreamRef`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FalRef {
    /// The endpoint the job was submitted to (absent in references written before it was kept).
    #[serde(default)]
    pub endpoint: String,
    /// fal's request id.
    pub request_id: String,
    /// Where to poll status.
    pub status_url: String,
    /// Where to fetch the result.
    pub response_url: String,
    /// Where to ask for cancellation.
    pub cancel_url: String,
}

impl FalRef {
    /// The opaque reference a job keeps, keyed by fal's request id (which webhooks name).
    #[must_use]
    pub fn to_upstream(&self) -> UpstreamRef {
        let FalRef { endpoint, request_id, status_url, response_url, cancel_url } = self;
        let value = serde_json::json!({
            "endpoint": endpoint,
            "request_id": request_id,
            "status_url": status_url,
            "response_url": response_url,
            "cancel_url": cancel_url,
        });
        UpstreamRef::keyed(value.to_string(), request_id.clone())
    }

    /// Reads a reference this adapter wrote.
    ///
    /// # Errors
    /// A message when the reference is not this adapter's.
    pub fn from_upstream(upstream: &UpstreamRef) -> Result<Self, String> {
        serde_json::from_str(upstream.as_str()).map_err(|_| "the job's provider reference is not fal's".to_owned())
    }
}
