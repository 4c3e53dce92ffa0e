//! The dashboard and alert rules in `deploy/` query only what genjobs exports: after a workload
//! that succeeds, fails and calls a client's webhook on Postgres, every metric name in every
//! panel and rule is in a `/metrics` scrape. A renamed metric breaks this test, not a dashboard in
//! production.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use genjobs_test_wait::wait_until;
use genjobs_tests::{ADMIN_TOKEN, WebhookReceiver, client_webhook_config, spawn_postgres_app};
use serde_json::{Value, json};

fn deploy_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Every panel's query of the Grafana dashboard.
fn dashboard_queries() -> Vec<String> {
    let dashboard: Value = serde_json::from_str(&deploy_file("grafana/genjobs.json")).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    panels
        .iter()
        .flat_map(|panel| panel["targets"].as_array().unwrap())
        .map(|target| target["expr"].as_str().unwrap().to_owned())
        .collect()
}

/// Every rule's expression in the alert rules, each written on its `expr:` line.
fn alert_expressions() -> Vec<String> {
    let rules = deploy_file("prometheus/alerts.yml");
    let expressions: Vec<String> =
        rules.lines().filter_map(|line| line.trim().strip_prefix("expr:")).map(|expr| expr.trim().to_owned()).collect();
    let alerts = rules.lines().filter(|line| line.trim().starts_with("- alert:")).count();
    assert_eq!(expressions.len(), alerts, "one single-line expr per alert");
    expressions
}

/// The metric names a PromQL expression reads (genjobs' names all start with `genjobs_`).
fn metric_names(expression: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expression;
    while let Some(start) = rest.find("genjobs_") {
        let name: String =
            rest[start..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect();
        rest = &rest[start + name.len()..];
        names.insert(name);
    }
    names
}

/// The metric names of a Prometheus text exposition (each sample line's name).
fn exported(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_query_reads_a_genjobs_metric() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 14, "the dashboard has its panels: {queries:?}");
    for expression in queries.iter().chain(&alert_expressions()) {
        assert!(!metric_names(expression).is_empty(), "{expression}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alerts_read_is_exported() {
    let app = spawn_postgres_app(client_webhook_config(Duration::from_secs(10))).await;
    let receiver = WebhookReceiver::start(vec![]).await;
    let user = app.create_user(1_000, json!({})).await;
    let hooked = app.submit("images", &user.key, json!({"prompt": "a kite", "webhook_url": receiver.url})).await;
    let failing = app.submit("images", &user.key, json!({"prompt": "a storm [sim:fail]"})).await;
    for receipt in [&hooked, &failing] {
        app.wait_final(&user.key, receipt["job_id"].as_str().unwrap()).await;
    }
    receiver.wait_for(1, Duration::from_secs(30)).await;

    let wanted: BTreeSet<String> =
        dashboard_queries().iter().chain(&alert_expressions()).flat_map(|e| metric_names(e)).collect();
    let scrape = async || {
        let response = app.get("/metrics", ADMIN_TOKEN).await;
        assert_eq!(response.status(), 200);
        exported(&response.text().await.unwrap())
    };
    // Counters of a job's end are recorded just after its commit: scrape until they show.
    let missing = |names: &BTreeSet<String>| wanted.difference(names).cloned().collect::<Vec<_>>();
    let names = wait_until(Duration::from_secs(30), "every queried metric in /metrics", scrape, |names| {
        missing(names).is_empty()
    })
    .await;
    assert_eq!(missing(&names), Vec::<String>::new());
}
