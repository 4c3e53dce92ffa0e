//! The replica tests of `shared/replicas/`, through a PgBouncer in transaction pooling mode
//! (`GENJOBS_DATABASE_POOLER=transaction`), with `LISTEN` on the direct connection: so that the
//! pooler path cannot rot.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use genjobs_test_postgres::TestDatabase;

/// Whether the database is reached through PgBouncer.
const POOLED: bool = true;

#[path = "shared/replicas/mod.rs"]
mod replicas;

async fn database() -> TestDatabase {
    TestDatabase::pooled().await
}
