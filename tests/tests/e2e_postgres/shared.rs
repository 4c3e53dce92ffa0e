//! The modules of `e2e` that every Postgres route runs (`e2e_postgres` directly, `e2e_pooled`
//! through PgBouncer); each calls the including binary's `spawn_app` and `spawn_app_with`.

#[path = "../e2e/admin.rs"]
mod admin;
#[path = "../e2e/admin_jobs.rs"]
mod admin_jobs;
#[path = "../e2e/auth.rs"]
mod auth;
#[path = "../e2e/batch_webhooks.rs"]
mod batch_webhooks;
#[path = "../e2e/batches.rs"]
mod batches;
#[path = "../e2e/boundaries_edge.rs"]
mod boundaries_edge;
#[path = "../e2e/capacity.rs"]
mod capacity;
#[path = "../e2e/catalog.rs"]
mod catalog;
#[path = "../e2e/client_webhooks.rs"]
mod client_webhooks;
#[path = "../e2e/concurrency.rs"]
mod concurrency;
#[path = "../e2e/errors.rs"]
mod errors;
#[path = "../e2e/fal_failures.rs"]
mod fal_failures;
#[path = "../e2e/hardening.rs"]
mod hardening;
#[path = "../e2e/jobs.rs"]
mod jobs;
#[path = "../e2e/key_tree.rs"]
mod key_tree;
#[path = "../e2e/keys.rs"]
mod keys;
#[path = "../e2e/ledger.rs"]
mod ledger;
#[path = "../e2e/models.rs"]
mod models;
#[path = "../e2e/moderation.rs"]
mod moderation;
#[path = "../e2e/money.rs"]
mod money;
#[path = "../e2e/openai.rs"]
mod openai;
#[path = "../e2e/openai_batches.rs"]
mod openai_batches;
#[path = "../e2e/openai_clients.rs"]
mod openai_clients;
#[path = "../e2e/openai_edits.rs"]
mod openai_edits;
#[path = "../e2e/openai_videos.rs"]
mod openai_videos;
#[path = "../e2e/operations.rs"]
mod operations;
#[path = "../e2e/outputs.rs"]
mod outputs;
#[path = "../e2e/provider_cost.rs"]
mod provider_cost;
#[path = "../e2e/provider_notifications.rs"]
mod provider_notifications;
#[path = "../e2e/replicate.rs"]
mod replicate;
#[path = "../e2e/routing.rs"]
mod routing;
#[path = "../e2e/streams.rs"]
mod streams;
#[path = "../e2e/submit.rs"]
mod submit;
#[path = "../e2e/tiers.rs"]
mod tiers;
#[path = "../e2e/uploads.rs"]
mod uploads;
#[path = "../e2e/upstream.rs"]
mod upstream;
#[path = "../e2e/wording.rs"]
mod wording;
