//! The wire formats of the API, apart from the domain's types: request bodies read from JSON and
//! turned into domain values once ([`requests`]), and the JSON shapes of responses built from
//! domain values ([`responses`]; the models listing's views are in `models`, the admin API's
//! model documents in [`catalog`], the schemas the derives cannot infer in `schemas`; client
//! webhooks' bodies and deliveries in [`webhooks`]). Renaming a domain field changes neither.

pub mod catalog;
mod models;
pub mod requests;
pub mod responses;
mod schemas;
pub mod usage;
pub mod webhooks;
