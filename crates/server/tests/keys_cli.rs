//! The operator's keys with the binary against a database: `keys create` with settings, `keys
//! list`, `keys set` (a flag sets, `--clear` removes), `keys revoke`, and a bad flag's exit code.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::process::{Command, Output};

use genjobs_test_postgres::TestDatabase;

fn genjobs(args: &[&str], database: &TestDatabase) -> Output {
    Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .args(args)
        .env_clear()
        .env("DATABASE_URL", &database.url)
        .output()
        .unwrap()
}

fn stdout(args: &[&str], database: &TestDatabase) -> String {
    let output = genjobs(args, database);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn keys_are_created_listed_changed_and_revoked() {
    let database = TestDatabase::new().await;
    let created = stdout(&["users", "create", "--name", "ada", "--credits", "10"], &database);
    let user = created.split_whitespace().nth(1).unwrap().to_owned();

    let key = stdout(
        &[
            "keys",
            "create",
            "--user",
            &user,
            "--name",
            "ci",
            "--allowed-models",
            "nano-banana,flux-pro",
            "--budget",
            "20",
            "--period",
            "day",
        ],
        &database,
    );
    assert!(key.contains("name=ci models=nano-banana,flux-pro budget=20/day used=0"), "{key}");
    assert!(key.contains("api key: gj_"), "{key}");
    let prefix = key.split_whitespace().next().unwrap().to_owned();

    let changed = stdout(
        &["keys", "set", "--prefix", &prefix, "--max-concurrent-jobs", "2", "--clear", "models,name"],
        &database,
    );
    assert!(changed.starts_with(&prefix) && changed.contains("max_concurrent_jobs=2"), "{changed}");
    assert!(!changed.contains("models=") && !changed.contains("name="), "{changed}");

    let bad = genjobs(&["keys", "set", "--prefix", &prefix, "--budget", "5", "--period", "year"], &database);
    assert_eq!(bad.status.code(), Some(2), "a bad value is a usage error");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--budget"));

    assert!(stdout(&["keys", "revoke", "--prefix", &prefix], &database).contains("revoked"));
    let listed = stdout(&["keys", "list", "--user", &user], &database);
    assert_eq!(listed.lines().count(), 2, "the first key and the revoked one: {listed}");
    assert!(listed.lines().any(|l| l.starts_with(&prefix) && l.ends_with("revoked")), "{listed}");
}
