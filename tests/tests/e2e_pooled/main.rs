//! The end-to-end suite of `e2e`, module for module, on the Postgres store reached through a
//! PgBouncer in transaction pooling mode (`GENJOBS_DATABASE_POOLER=transaction`, `LISTEN` and
//! migrations on the direct connection), as operators deploy many replicas: each test starts
//! genjobs on a database of its own.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

#[path = "../e2e_postgres/shared.rs"]
mod shared;

use genjobs::Config;
use genjobs_tests::{TestApp, fast_config, spawn_pooled_app};

pub(crate) async fn spawn_app() -> TestApp {
    spawn_pooled_app(fast_config()).await
}

pub(crate) async fn spawn_app_with(config: Config) -> TestApp {
    spawn_pooled_app(config).await
}
