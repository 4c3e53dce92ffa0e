//! The wire formats of the API, apart from the domain's types: request bodies read from JSON and
//! turned into domain values once ([`requests`]), and the JSON shapes of responses built from
//! domain values ([`responses`]). Renaming a domain field changes neither.

pub mod requests;
pub mod responses;
