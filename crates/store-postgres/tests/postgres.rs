//! The replica tests of `shared/replicas/`, on a direct connection to Postgres.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use genjobs_test_postgres::TestDatabase;

/// Whether the database is reached through PgBouncer.
const POOLED: bool = false;

#[path = "shared/replicas/mod.rs"]
mod replicas;

async fn database() -> TestDatabase {
    TestDatabase::new().await
}
