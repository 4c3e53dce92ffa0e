//! OpenAI's official clients against genjobs, as a user's tool would use them: the Python package
//! (`tests/python/openai_client.py`) and the Node package (`tests/node/openai_client.mjs`) make
//! the calls and check what the package returns; here the jobs, batches and credits they left are
//! checked.

use std::path::Path;
use std::process::Command;

use genjobs_tests::{TestApp, node_tools, python_tools};
use serde_json::{Value, json};

use crate::spawn_app;

/// Runs a client's script against `app` as `user`, and returns its report (its output's last line).
async fn run(mut command: Command, app: &TestApp, key: &str) -> Value {
    command.env("OPENAI_BASE_URL", app.url("/openai/v1")).env("OPENAI_API_KEY", key);
    // The script blocks; the service answering it runs on this test's runtime.
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

/// Every job a script made is listed natively, none is left holding credits, and the account was
/// charged exactly what the jobs delivered: a failed or deleted one cost nothing, a retried call
/// was one job.
async fn assert_charged_once(app: &TestApp, key: &str, granted: u64, report: &Value) {
    let jobs: Value = app.get("/api/v1/jobs?limit=100", key).await.json().await.unwrap();
    let jobs = jobs["data"].as_array().unwrap();
    assert_eq!(Some(jobs.len() as u64), report["jobs"].as_u64(), "{report}");
    assert!(jobs.iter().all(|job| ["succeeded", "failed", "canceled"].contains(&job["state"].as_str().unwrap())));
    let charged: u64 = jobs.iter().map(|job| job["credits_actual"].as_u64().unwrap_or(0)).sum();
    let account: Value = app.get("/api/v1/account", key).await.json().await.unwrap();
    assert_eq!((account["credits_spent"].as_u64(), account["credits_held"].as_u64()), (Some(charged), Some(0)));
    assert_eq!(account["credits_available"].as_u64(), Some(granted - charged));
}

/// The batches a script made are native batches: the completed one charged its two succeeded
/// requests at the batch price, the canceled one nothing.
async fn assert_batches_charged(app: &TestApp, key: &str, report: &Value) {
    let quote = json!({"model": "nano-banana", "prompt": "x", "batch": true});
    let quote: Value = app.post("/api/v1/images/generations/quote", key, &quote).await.json().await.unwrap();
    let price = quote["credits"].as_u64().unwrap();
    let native = |id: &Value| format!("/api/v1/batches/{}", id.as_str().unwrap_or_default());
    let completed: Value = app.get(&native(&report["batches"]["completed"]), key).await.json().await.unwrap();
    assert_eq!(completed["state"], "completed", "{completed}");
    assert_eq!(
        (completed["counts"]["succeeded"].as_u64(), completed["credits_spent"].as_u64()),
        (Some(2), Some(2 * price))
    );
    let canceled: Value = app.get(&native(&report["batches"]["cancelled"]), key).await.json().await.unwrap();
    assert_eq!(canceled["state"], "canceled", "{canceled}");
    assert_eq!((canceled["counts"]["canceled"].as_u64(), canceled["credits_spent"].as_u64()), (Some(2), Some(0)));
}

#[tokio::test]
async fn the_official_openai_python_client_works_against_genjobs() {
    let app = spawn_app().await;
    let user = app.create_user(400, json!({"max_concurrent_jobs": 10})).await;
    let poor = app.create_user(1, json!({})).await;
    let mut command = Command::new(python_tools());
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("python/openai_client.py"))
        .env("GENJOBS_POOR_KEY", &poor.key);
    let report = run(command, &app, &user.key).await;
    assert_charged_once(&app, &user.key, 400, &report).await;
    assert_batches_charged(&app, &user.key, &report).await;
}

#[tokio::test]
async fn the_official_openai_node_client_works_against_genjobs() {
    let app = spawn_app().await;
    let user = app.create_user(400, json!({"max_concurrent_jobs": 10})).await;
    let mut command = Command::new("node");
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("node/openai_client.mjs"))
        .env("GENJOBS_NODE_TOOLS", node_tools());
    let report = run(command, &app, &user.key).await;
    assert_charged_once(&app, &user.key, 400, &report).await;
    assert_batches_charged(&app, &user.key, &report).await;
}
