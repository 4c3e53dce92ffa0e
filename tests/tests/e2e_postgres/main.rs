//! The end-to-end suite of `e2e`, module for module, on the Postgres store: each test starts
//! genjobs on a database of its own.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

#[path = "../e2e/admin.rs"]
mod admin;
#[path = "../e2e/auth.rs"]
mod auth;
#[path = "../e2e/concurrency.rs"]
mod concurrency;
#[path = "../e2e/errors.rs"]
mod errors;
#[path = "../e2e/jobs.rs"]
mod jobs;
#[path = "../e2e/models.rs"]
mod models;
#[path = "../e2e/streams.rs"]
mod streams;
#[path = "../e2e/submit.rs"]
mod submit;
#[path = "../e2e/upstream.rs"]
mod upstream;

use genjobs::Config;
use genjobs_tests::{TestApp, fast_config, spawn_postgres_app};

pub(crate) async fn spawn_app() -> TestApp {
    spawn_postgres_app(fast_config()).await
}

pub(crate) async fn spawn_app_with(config: Config) -> TestApp {
    spawn_postgres_app(config).await
}
