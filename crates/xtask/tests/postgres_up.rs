//! `scripts/postgres-up.sh`, which `cargo xtask test` runs first: it looks for Postgres where
//! `DATABASE_URL` says, not at a fixed address.

use std::path::PathBuf;
use std::process::{Command, Output};

fn postgres_up(database_url: &str) -> Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres-up.sh");
    Command::new(script)
        .env("DATABASE_URL", database_url)
        .env("POSTGRES_UP_WAIT_SECS", "1")
        .output()
        .expect("scripts/postgres-up.sh runs")
}

/// The server the tests use answers: the script says nothing and succeeds.
#[test]
fn the_server_database_url_names_is_found() {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let found = postgres_up(&url);
    assert!(found.status.success(), "{}", String::from_utf8_lossy(&found.stderr));
}

/// A server elsewhere that does not answer is named, even while the local one runs: the script
/// checked the address it was given.
#[test]
fn a_server_elsewhere_that_does_not_answer_is_named() {
    let missing = postgres_up("postgres://postgres@127.0.0.2:1/postgres");
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success(), "{said}");
    assert!(said.contains("127.0.0.2"), "the refusal names the host DATABASE_URL gave: {said}");
}
