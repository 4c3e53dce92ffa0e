//! # genjobs-client-webhooks
//!
//! The adapters of client webhooks (the domain's `webhooks` ports):
//! - [`HttpWebhookTransport`]: checks a destination (its host resolved, every address public
//!   unless the operator allows private ones), signs each attempt by the Standard Webhooks scheme
//!   with the `standardwebhooks` crate, and posts it with reqwest: no redirect followed, a
//!   timeout per attempt, and names resolved again at connection time through the output store's
//!   `PublicResolver`, so a name that changes after the check (DNS rebinding) is caught.
//! - [`SealedSecrets`]: users' secrets encrypted at rest with ChaCha20-Poly1305 (ring) under a
//!   key derived from `GENJOBS_SECRET_KEY`, so that a database dump alone cannot sign.
//! - [`ClientWebhookArgs`]: their flags and variables, which the binary flattens into its own.

mod args;
mod secrets;
mod transport;

pub use args::ClientWebhookArgs;
pub use secrets::SealedSecrets;
pub use transport::{HttpWebhookTransport, TransportSettings};
