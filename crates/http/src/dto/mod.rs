//! The wire formats of the API, apart from the domain's types: request bodies read from JSON and
//! turned into domain values once ([`requests`]), and the JSON shapes of responses built from
//! domain values ([`responses`]; the models listing's views are in `models`, the schemas the
//! derives cannot infer in `schemas`). Renaming a domain field changes neither.

mod models;
pub mod requests;
pub mod responses;
mod schemas;
pub mod usage;
