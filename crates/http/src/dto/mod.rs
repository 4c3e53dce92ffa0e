//! The edge's side of the wire formats, whose types are `genjobs-api`'s: request bodies read from
//! JSON with serde and turned into domain values once ([`requests`]), and the views of domain
//! values as the API's answers ([`responses`]; the models listing's in `models`, the admin API's
//! model documents in [`catalog`], every user's jobs in [`admin_jobs`], batches in [`batches`], the ledger and usage in
//! [`usage`], client webhooks' bodies and deliveries in [`client_webhooks`], keys with their
//! settings in [`keys`]). Renaming a domain field changes neither; the API crate does not
//! know the domain, so these conversions live here.

pub mod admin_jobs;
pub mod batches;
pub mod catalog;
pub mod client_webhooks;
pub mod keys;
mod models;
pub mod requests;
pub mod responses;
pub mod usage;
mod wording;

pub use models::model_view;
