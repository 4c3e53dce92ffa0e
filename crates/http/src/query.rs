//! A request's query string, read by name: what the handlers and the wire formats both read, so
//! that neither reaches into the other for it.

use std::collections::HashMap;

use actix_web::web;
use genjobs_domain::invalid::InvalidRequest;

/// The query string's parameters by name; a parameter given twice keeps its last value.
pub(crate) type Query = web::Query<HashMap<String, String>>;

/// The parameter `name` as a whole number from `min` to `max`, if given.
///
/// # Errors
/// [`InvalidRequest`] naming `name` and its range for any other text.
pub(crate) fn integer_param(query: &Query, name: &str, min: u64, max: u64) -> Result<Option<u64>, InvalidRequest> {
    query
        .get(name)
        .map(|text| {
            text.parse::<u64>()
                .ok()
                .filter(|v| (min..=max).contains(v))
                .ok_or_else(|| InvalidRequest::param(name, format!("`{name}` must be an integer from {min} to {max}")))
        })
        .transpose()
}
