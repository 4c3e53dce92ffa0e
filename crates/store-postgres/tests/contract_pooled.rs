//! The store contract suite, on Postgres through a PgBouncer in transaction pooling mode: a
//! database per case.

use std::sync::Arc;

use genjobs_store_postgres::{PgAdapters, PgStore, connect};
use genjobs_test_postgres::TestDatabase;

/// The store of a replica built as the binary builds it; the adapters and the database live as
/// long as the case.
async fn store() -> (Arc<PgStore>, (PgAdapters, TestDatabase)) {
    let db = TestDatabase::pooled().await;
    let adapters = connect(&db.settings()).expect("adapters");
    (Arc::clone(&adapters.store), (adapters, db))
}

genjobs_store_contract::store_contract_tests!(store());
