//! # genjobs-test-postgres
//!
//! Test support for the Postgres side of genjobs, kept out of the production crates: a
//! [`TestDatabase`] per test, dropped when the value is dropped.
//!
//! Migrating a fresh database for every test costs a few hundred milliseconds each; so the
//! migrations run once into a template database named after a digest of `migrations/`, and each
//! test database is `CREATE DATABASE … TEMPLATE` of it, a file copy on the server. A change to any
//! migration gives a new digest, so a stale template is never used. Without a server the tests
//! panic with what to do; they never skip.
//!
//! [`TestDatabase::pooled`] gives a database reached through a PgBouncer in transaction mode
//! (`pgbouncer`), so that the store's suites run a second time the way operators deploy it.

mod gate;
mod pgbouncer;

pub use gate::Gate;
pub use pgbouncer::{Pgbouncer, pgbouncer, pgbouncer_as_deployed, pgbouncer_of_its_own};

use std::path::Path;
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use genjobs_store_postgres::{PgSettings, Pooler, run_migrations};
use genjobs_test_wait::wait_until;
use sha2::{Digest, Sha256};

/// The server tests use when `DATABASE_URL` is not set.
pub const LOCAL_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Serializes template creation across test processes.
const TEMPLATE_LOCK: i64 = 7_423_002;

/// A migrated database of its own, dropped with this value.
#[derive(Debug)]
pub struct TestDatabase {
    /// URL of the test database.
    pub url: String,
    name: String,
    admin_url: String,
    /// The URL through the test PgBouncer, for a [`TestDatabase::pooled`] one.
    pooled_url: Option<String>,
    /// The URL `LISTEN` uses when not [`TestDatabase::url`].
    listen_url: Option<String>,
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

/// The `host:port` of a Postgres URL.
fn server_of(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = after_scheme.split('/').next().unwrap_or(after_scheme);
    authority.rsplit_once('@').map_or(authority, |(_, host)| host).to_owned()
}

/// A digest of every file under `migrations/`, in path order.
fn migrations_digest() -> String {
    fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() { walk(&path, files) } else { files.push(path) }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    let mut hasher = Sha256::new();
    for file in files {
        hasher.update(file.strip_prefix(&root).unwrap_or(&file).to_string_lossy().as_bytes());
        hasher.update(std::fs::read(&file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display())));
    }
    hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn execute(conn: &mut AsyncPgConnection, sql: &str) -> Result<usize, diesel::result::Error> {
    diesel::sql_query(sql).execute(conn).await
}

/// The name of the migrated template, creating it first if no test process has.
async fn template(admin: &mut AsyncPgConnection, admin_url: &str) -> String {
    let name = format!("genjobs_template_{}", migrations_digest());
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! { panic!("cannot {what} the template {name}: {e}") };
    execute(admin, &format!("SELECT pg_advisory_lock({TEMPLATE_LOCK})")).await.unwrap_or_else(|e| fail("lock", &e));
    let exists: Vec<Count> =
        diesel::sql_query(format!("SELECT count(*) AS n FROM pg_database WHERE datname = '{name}'"))
            .load(admin)
            .await
            .unwrap_or_else(|e| fail("look up", &e));
    if exists.iter().all(|c| c.n == 0) {
        // Built under another name and renamed when complete, so that a test process that dies
        // half-way never leaves a half-migrated template behind.
        let building = format!("{name}_building");
        execute(admin, &format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"))
            .await
            .unwrap_or_else(|e| fail("clean up", &e));
        execute(admin, &format!("CREATE DATABASE {building}")).await.unwrap_or_else(|e| fail("create", &e));
        run_migrations(&PgSettings::new(with_database(admin_url, &building)))
            .await
            .unwrap_or_else(|e| fail("migrate", &e));
        execute(admin, &format!("ALTER DATABASE {building} RENAME TO {name}"))
            .await
            .unwrap_or_else(|e| fail("rename", &e));
    }
    execute(admin, &format!("SELECT pg_advisory_unlock({TEMPLATE_LOCK})")).await.unwrap_or_else(|e| fail("unlock", &e));
    name
}

impl TestDatabase {
    /// Creates a fresh database from the migrated template.
    ///
    /// # Panics
    /// When no Postgres server answers: the tests need one, and say so.
    pub async fn new() -> TestDatabase {
        let admin_url = std::env::var("DATABASE_URL").unwrap_or_else(|_| LOCAL_SERVER.to_owned());
        let mut admin = AsyncPgConnection::establish(&admin_url).await.unwrap_or_else(|e| {
            panic!(
                "the Postgres tests need a server: cannot connect to {admin_url}: {e}. Start it \
                 (scripts/postgres-up.sh starts the one this machine has) or set DATABASE_URL."
            )
        });
        let template = template(&mut admin, &admin_url).await;
        let name = format!("genjobs_test_{}", uuid::Uuid::new_v4().simple());
        // Postgres refuses to copy a template while another session is connected to it, which a
        // just-closed migration connection may still briefly be.
        let create = format!("CREATE DATABASE {name} TEMPLATE {template}");
        wait_until(
            Duration::from_secs(10),
            &format!("the test database {name} created from {template}"),
            async || execute(&mut admin, &create).await,
            Result::is_ok,
        )
        .await
        .expect("the wait ends on a success");
        TestDatabase { url: with_database(&admin_url, &name), name, admin_url, pooled_url: None, listen_url: None }
    }

    /// [`TestDatabase::new`], reached through the test process's PgBouncer in transaction mode:
    /// its [`TestDatabase::settings`] point the pool there, with `LISTEN` and migrations on the
    /// direct [`TestDatabase::url`].
    ///
    /// # Panics
    /// As [`TestDatabase::new`], and when PgBouncer cannot be started.
    pub async fn pooled() -> TestDatabase {
        let mut db = TestDatabase::new().await;
        let server = server_of(&db.url);
        let pooler = pgbouncer(&server);
        db.pooled_url = Some(db.url.replacen(&server, &pooler.addr.to_string(), 1));
        db
    }

    /// [`TestDatabase::new`], reached through a [`Gate`] that the test can close: the pool
    /// through a PgBouncer of its own behind the gate, `LISTEN` through the gate directly, as an
    /// operator deploys a pooler; closing the gate makes the database unreachable for both.
    ///
    /// # Panics
    /// As [`TestDatabase::pooled`].
    pub async fn pooled_behind_gate() -> (TestDatabase, Gate) {
        let mut db = TestDatabase::new().await;
        let server = server_of(&db.url);
        let gate = Gate::open_to(&server).await;
        let pooler = pgbouncer_of_its_own(&gate.addr.to_string());
        db.pooled_url = Some(db.url.replacen(&server, &pooler.addr.to_string(), 1));
        db.listen_url = Some(db.url.replacen(&server, &gate.addr.to_string(), 1));
        (db, gate)
    }

    /// The one integer `sql` answers in a column named `n` (a size, a count), read directly on a
    /// connection of its own: for tests that measure what the store keeps.
    ///
    /// # Panics
    /// When the database does not answer, or `sql` answers no such row.
    pub async fn number(&self, sql: &str) -> i64 {
        let mut conn = AsyncPgConnection::establish(&self.url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let rows: Vec<Count> = diesel::sql_query(sql).load(&mut conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.into_iter().next().map(|row| row.n).unwrap_or_else(|| panic!("{sql}: no row"))
    }

    /// Settings for a pool on this database: direct, or through PgBouncer for a pooled one.
    #[must_use]
    pub fn settings(&self) -> PgSettings {
        let direct = PgSettings { pool_size: 8, ..PgSettings::new(self.url.clone()) };
        match &self.pooled_url {
            Some(url) => PgSettings {
                url: url.clone(),
                pooler: Pooler::Transaction,
                listen_url: Some(self.listen_url.clone().unwrap_or_else(|| self.url.clone())),
                ..direct
            },
            None => direct,
        }
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
                execute(&mut admin, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(_))) {
            eprintln!("could not drop the test database {}", self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_name_is_replaced_and_options_kept() {
        assert_eq!(with_database("postgres://u@h:5432/postgres", "t1"), "postgres://u@h:5432/t1");
        assert_eq!(with_database("postgres://u@h/postgres?sslmode=disable", "t1"), "postgres://u@h/t1?sslmode=disable");
        assert_eq!(with_database("postgres://u@h:5432", "t1"), "postgres://u@h:5432/t1");
    }

    #[test]
    fn the_server_is_read_from_the_url() {
        assert_eq!(server_of("postgres://postgres@127.0.0.1:5432/t1"), "127.0.0.1:5432");
        assert_eq!(server_of("postgres://u:p@h:6432/t1?sslmode=disable"), "h:6432");
    }

    #[test]
    fn the_template_is_named_after_the_migrations() {
        let digest = migrations_digest();
        assert_eq!(digest.len(), 16);
        assert_eq!(digest, migrations_digest());
    }

    #[tokio::test]
    async fn test_databases_come_migrated_and_go() {
        let db = TestDatabase::new().await;
        let mut conn = AsyncPgConnection::establish(&db.url).await.unwrap();
        let tables: Vec<Count> = diesel::sql_query(
            "SELECT count(*) AS n FROM information_schema.tables WHERE table_name IN ('jobs', 'users', 'ledger')",
        )
        .load(&mut conn)
        .await
        .unwrap();
        assert_eq!(tables[0].n, 3);
        drop(conn);
        let (admin_url, name) = (db.admin_url.clone(), db.name.clone());
        drop(db);
        let mut admin = AsyncPgConnection::establish(&admin_url).await.unwrap();
        let left: Vec<Count> =
            diesel::sql_query(format!("SELECT count(*) AS n FROM pg_database WHERE datname = '{name}'"))
                .load(&mut admin)
                .await
                .unwrap();
        assert_eq!(left[0].n, 0);
    }
}
