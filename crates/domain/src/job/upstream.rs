//! [`UpstreamRef`]: where a job lives at its provider, as a typed value that stores keep as it is.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a job lives at the provider: the provider's name, the provider's own id of the job (by
/// which its notifications name it), and the named details its adapter needs to reach the job
/// again (an endpoint, a status URL). Only the adapter that wrote a reference reads its details;
/// stores keep all three as they are (a store reads them back once, typed, so that polling never
/// parses text) and find a job by its id ([`crate::ports::JobStore::job_by_upstream_key`]).
///
/// Shared: a job is cloned at every read from a cache and every transition, and a reference,
/// once the provider gave it, does not change.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamRef(Arc<Parts>);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Parts {
    provider: String,
    id: String,
    details: BTreeMap<String, String>,
}

impl UpstreamRef {
    /// The job `id` at `provider`, with no details yet.
    #[must_use]
    pub fn new(provider: impl Into<String>, id: impl Into<String>) -> Self {
        Self(Arc::new(Parts { provider: provider.into(), id: id.into(), details: BTreeMap::new() }))
    }

    /// The same reference with the detail `name` set to `value`.
    #[must_use]
    pub fn with_detail(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.0).details.insert(name.into(), value.into());
        self
    }

    /// The name of the provider that holds the job.
    #[must_use]
    pub fn provider(&self) -> &str {
        &self.0.provider
    }

    /// The provider's id of the job, which its notifications name.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.0.id
    }

    /// The detail `name`, when the adapter kept it.
    #[must_use]
    pub fn detail(&self, name: &str) -> Option<&str> {
        self.0.details.get(name).map(String::as_str)
    }

    /// Every detail, by name.
    #[must_use]
    pub fn details(&self) -> &BTreeMap<String, String> {
        &self.0.details
    }
}

impl std::fmt::Display for UpstreamRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.0.provider, self.0.id)
    }
}
