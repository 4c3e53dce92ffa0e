//! `genjobs keys` with the binary: an operator's against a database (`keys create` with
//! settings, `keys list`, `keys set` (a flag sets, `--clear` removes), `keys revoke`, a bad flag's
//! exit code), and a user's own through a spawned service, without DATABASE_URL.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

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
    for name in ["", "  ", &"x".repeat(201)] {
        let refused = genjobs(&["users", "create", "--name", name, "--credits", "10"], &database);
        assert_eq!(refused.status.code(), Some(2), "a name the API refuses is refused here too: {name:?}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("--name"), "{refused:?}");
    }
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

/// `genjobs` serving on a free port over `database`; the process and its base URL.
fn serve(database: &TestDatabase) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .env_clear()
        .env("DATABASE_URL", &database.url)
        .env("GENJOBS_BIND", "127.0.0.1:0")
        .env("GENJOBS_SIM_PORT", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut address = None;
    while address.is_none() {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "genjobs exited before listening");
        address = line.trim_end().strip_prefix("genjobs listening on ").map(str::to_owned);
    }
    // Read on: a service whose stdout is closed would die of its next line.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    (child, address.unwrap())
}

/// `genjobs` as a user of the service at `address` calling with `key`, no DATABASE_URL.
fn as_user(address: &str, key: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .args(args)
        .env_clear()
        .env("GENJOBS_API_URL", address)
        .env("GENJOBS_API_KEY", key)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn succeeded(output: Output) -> String {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Exit status and stderr of a call expected to fail.
fn refused(output: Output) -> (Option<i32>, String) {
    assert!(!output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    (output.status.code(), String::from_utf8(output.stderr).unwrap())
}

fn api_key(printed: &str) -> String {
    printed.lines().find_map(|l| l.strip_prefix("api key: ")).unwrap().to_owned()
}

#[tokio::test]
async fn users_manage_their_own_keys_through_the_service_and_operators_see_them() {
    let database = TestDatabase::new().await;
    let created = stdout(&["users", "create", "--name", "ada", "--credits", "100"], &database);
    let (user, key) = (created.split_whitespace().nth(1).unwrap().to_owned(), api_key(&created));
    let other = api_key(&stdout(&["users", "create", "--name", "bob", "--credits", "1"], &database));
    let (mut service, address) = serve(&database);

    let issued = succeeded(as_user(
        &address,
        &key,
        &["keys", "create", "--name", "ci", "--allowed-models", "nano-banana", "--budget", "20", "--period", "day"],
    ));
    assert!(issued.contains("name=ci models=nano-banana budget=20/day used=0"), "{issued}");
    let restricted = api_key(&issued);
    let prefix = issued.split_whitespace().next().unwrap().to_owned();

    let listed: serde_json::Value =
        serde_json::from_str(&succeeded(as_user(&address, &key, &["keys", "list", "--json"]))).unwrap();
    let prefixes: Vec<&str> =
        listed["data"].as_array().unwrap().iter().map(|k| k["prefix"].as_str().unwrap()).collect();
    assert_eq!(prefixes.len(), 2, "the first key and the new one: {listed}");
    assert!(prefixes.contains(&prefix.as_str()), "{listed}");

    let (code, stderr) =
        refused(as_user(&address, &restricted, &["keys", "create", "--budget", "50", "--period", "day"]));
    assert_eq!(code, Some(3), "wider than the calling key is the service's refusal: {stderr}");
    assert!(stderr.contains("KEY_SCOPE_EXCEEDED") && stderr.contains("no more than the key that made it"), "{stderr}");
    assert!(!stderr.contains("another user"), "the hint of another refusal: {stderr}");

    for (args, names) in [
        (&["keys", "create", "--budget", "5", "--period", "year"][..], "--budget"),
        (&["keys", "create", "--expires-at", "tomorrow"], "--expires-at"),
        (&["keys", "create", "--allowed-models", "no-such-model"], "models"),
        (&["keys", "set", "--prefix", &prefix, "--name", "x"], "PATCH /api/admin/keys"),
        (&["keys", "list", "--user", &user], "DATABASE_URL"),
    ] {
        let (code, stderr) = refused(as_user(&address, &key, args));
        assert_eq!(code, Some(2), "{args:?} is a usage error: {stderr}");
        assert!(stderr.contains(names), "{args:?}: {stderr}");
    }
    let (code, stderr) = refused(as_user(&address, &other, &["keys", "revoke", "--prefix", &prefix]));
    assert_eq!(code, Some(3), "another user's key is not found: {stderr}");
    assert!(stderr.contains("KEY_NOT_FOUND") && stderr.contains("check the key prefix"), "{stderr}");

    assert!(succeeded(as_user(&address, &key, &["keys", "revoke", "--prefix", &prefix])).contains("revoked"));
    let (code, _) = refused(as_user(&address, &restricted, &["keys", "list"]));
    assert_eq!(code, Some(3), "a revoked key is refused at once");

    let operator = stdout(&["keys", "list", "--user", &user], &database);
    assert!(operator.lines().any(|l| l.starts_with(&prefix) && l.ends_with("revoked")), "{operator}");
    let without_user = genjobs(&["keys", "create", "--name", "x"], &database);
    assert_eq!(without_user.status.code(), Some(2), "an operator names the user");
    assert!(String::from_utf8_lossy(&without_user.stderr).contains("--user"));
    service.kill().unwrap();
    service.wait().unwrap();
}
