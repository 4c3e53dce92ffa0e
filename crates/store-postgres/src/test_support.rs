//! A database per test: created from `DATABASE_URL` (or the local server at 127.0.0.1:5432),
//! migrated, and dropped when the [`TestDatabase`] is dropped. Without a server it panics with
//! what to do; it never skips.

use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

use crate::pool::{PgSettings, run_migrations};

/// The server tests use when `DATABASE_URL` is not set.
pub const LOCAL_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A migrated database of its own, dropped with this value.
#[derive(Debug)]
pub struct TestDatabase {
    /// URL of the test database.
    pub url: String,
    name: String,
    admin_url: String,
}

/// `url` with its database name replaced by `name`.
#[must_use]
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..].find('/').map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{name}", &base[..host_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

impl TestDatabase {
    /// Creates and migrates a fresh database.
    ///
    /// # Panics
    /// When no Postgres server answers: the tests need one, and say so.
    pub async fn new() -> TestDatabase {
        let admin_url = std::env::var("DATABASE_URL").unwrap_or_else(|_| LOCAL_SERVER.to_owned());
        let name = format!("genjobs_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = AsyncPgConnection::establish(&admin_url).await.unwrap_or_else(|e| {
            panic!(
                "the Postgres tests need a server: cannot connect to {admin_url}: {e}. Start it \
                 (pg_ctlcluster --skip-systemctl-redirect 15 main start) or set DATABASE_URL."
            )
        });
        diesel::sql_query(format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("cannot create the test database {name}: {e}"));
        let url = with_database(&admin_url, &name);
        run_migrations(&PgSettings::new(url.clone()))
            .await
            .unwrap_or_else(|e| panic!("migrations failed on {name}: {e}"));
        TestDatabase { url, name, admin_url }
    }

    /// Settings for a pool on this database.
    #[must_use]
    pub fn settings(&self) -> PgSettings {
        PgSettings { pool_size: 8, ..PgSettings::new(self.url.clone()) }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        // Drop runs inside or outside a runtime; a thread of its own with its own runtime works
        // in both.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let mut admin = AsyncPgConnection::establish(&admin_url).await.ok()?;
                diesel::sql_query(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut admin).await.ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(_))) {
            eprintln!("could not drop the test database {}", self.name);
        }
    }
}

/// Waits until `check` holds or `limit` passes; for tests of things that happen in the background.
pub async fn eventually(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check().await
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_name_is_replaced_and_options_kept() {
        assert_eq!(with_database("postgres://u@h:5432/postgres", "t1"), "postgres://u@h:5432/t1");
        assert_eq!(with_database("postgres://u@h/postgres?sslmode=disable", "t1"), "postgres://u@h/t1?sslmode=disable");
        assert_eq!(with_database("postgres://u@h:5432", "t1"), "postgres://u@h:5432/t1");
    }
}
