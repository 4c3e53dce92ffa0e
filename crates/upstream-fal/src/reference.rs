//! [`FalRef`]: what the adapter keeps of a job at fal, as the details of the job's
//! [`UpstreamRef`].

use genjobs_domain::job::UpstreamRef;

/// The provider name this adapter writes into every reference it makes.
pub const PROVIDER: &str = "fal";

/// Where a job lives at fal, kept as the job's [`UpstreamRef`]: fal's request id is the
/// reference's key (webhooks name it), the rest are its details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FalRef {
    /// The endpoint the job was submitted to (empty in references written before it was kept).
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
    /// The reference a job keeps, keyed by fal's request id.
    #[must_use]
    pub fn to_upstream(&self) -> UpstreamRef {
        UpstreamRef::new(PROVIDER, &self.request_id)
            .with_detail("endpoint", &self.endpoint)
            .with_detail("status_url", &self.status_url)
            .with_detail("response_url", &self.response_url)
            .with_detail("cancel_url", &self.cancel_url)
    }

    /// Reads a reference this adapter wrote.
    ///
    /// # Errors
    /// A message when the reference is another provider's or lacks a URL this adapter needs.
    pub fn from_upstream(upstream: &UpstreamRef) -> Result<Self, String> {
        if upstream.provider() != PROVIDER {
            return Err(format!("the job's provider reference is {}'s, not fal's", upstream.provider()));
        }
        let url = |name: &str| {
            upstream.detail(name).map(str::to_owned).ok_or_else(|| format!("the job's fal reference has no {name}"))
        };
        Ok(Self {
            endpoint: upstream.detail("endpoint").unwrap_or_default().to_owned(),
            request_id: upstream.key().to_owned(),
            status_url: url("status_url")?,
            response_url: url("response_url")?,
            cancel_url: url("cancel_url")?,
        })
    }
}
