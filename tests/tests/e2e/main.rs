//! End-to-end tests over real HTTP on the embedded default (in-memory store); one binary, one
//! module per area, to link once. `e2e_postgres` runs the same modules on Postgres.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

mod admin;
mod admin_jobs;
mod auth;
mod batch_webhooks;
mod batches;
mod boundaries_edge;
mod capacity;
mod catalog;
mod client;
mod client_webhooks;
mod concurrency;
mod embedded;
mod errors;
mod fal_failures;
mod hardening;
mod jobs;
mod key_tree;
mod keys;
mod ledger;
mod link_secret;
mod models;
mod moderation;
mod money;
mod openai;
mod openai_batches;
mod openai_clients;
mod openai_edits;
mod openai_videos;
mod operations;
mod outputs;
mod provider_cost;
mod provider_notifications;
mod replicate;
mod routing;
mod streams;
mod submit;
mod tiers;
mod uploads;
mod upstream;
mod wording;

pub(crate) use genjobs_tests::{spawn_app, spawn_app_with};
