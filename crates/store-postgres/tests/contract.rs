//! The store contract suite, on Postgres: a database per case.

use std::sync::Arc;

use genjobs_store_postgres::{KeyCache, PgStore, pool};
use genjobs_test_postgres::TestDatabase;

async fn store() -> (Arc<PgStore>, TestDatabase) {
    let db = TestDatabase::new().await;
    let settings = db.settings();
    let pool = pool(&settings).expect("pool");
    (Arc::new(PgStore::new(pool, Arc::new(KeyCache::new(settings.key_cache_ttl)))), db)
}

genjobs_store_contract::store_contract_tests!(store());
