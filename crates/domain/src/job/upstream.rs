//! [`UpstreamRef`]: where a job lives at its provider, as a typed value that stores keep as it is.

use std::collections::BTreeMap;

/// Where a job lives at the provider: the provider's name, the provider's own id of the job (by
/// which its notifications name it), and the named details its adapter needs to reach the job
/// again (an endpoint, a status URL). Only the adapter that wrote a reference reads its details;
/// stores keep all three as they are (a store reads them back once, typed, so that polling never
/// parses text) and find a job by its id ([`crate::ports::JobStore::job_by_upstream_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamRef {
    provider: String,
    id: String,
    details: BTreeMap<String, String>,
}

impl UpstreamRef {
    /// The job `id` at `provider`, with no details yet.
    #[must_use]
    pub fn new(provider: impl Into<String>, id: impl Into<String>) -> Self {
        Self { provider: provider.into(), id: id.into(), details: BTreeMap::new() }
    }

    /// The same reference with the detail `name` set to `value`.
    #[must_use]
    pub fn with_detail(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.details.insert(name.into(), value.into());
        self
    }

    /// The name of the provider that holds the job.
    #[must_use]
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The provider's id of the job, which its notifications name.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.id
    }

    /// The detail `name`, when the adapter kept it.
    #[must_use]
    pub fn detail(&self, name: &str) -> Option<&str> {
        self.details.get(name).map(String::as_str)
    }

    /// Every detail, by name.
    #[must_use]
    pub fn details(&self) -> &BTreeMap<String, String> {
        &self.details
    }
}

impl std::fmt::Display for UpstreamRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.provider, self.id)
    }
}
