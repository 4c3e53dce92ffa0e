//! [`ReceivedRequest`]: a request body as the client sent it, before any default was filled in,
//! kept with its job so that an operator sees exactly what was asked.

use std::sync::Arc;

use serde_json::{Map, Value};

/// The JSON object a submission arrived with, unchanged. Shared, since a job is cloned at every
/// transition and the body never changes.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedRequest(Arc<Map<String, Value>>);

impl ReceivedRequest {
    /// The body `fields`, as received.
    #[must_use]
    pub fn new(fields: Map<String, Value>) -> Self {
        Self(Arc::new(fields))
    }

    /// Its fields, as received.
    #[must_use]
    pub fn fields(&self) -> &Map<String, Value> {
        &self.0
    }
}
