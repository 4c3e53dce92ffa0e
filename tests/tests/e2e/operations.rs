use std::time::Duration;

use crate::spawn_app;
use genjobs_test_wait::wait_until;
use genjobs_tests::{assert_error, sample_sum};
use serde_json::{Value, json};

#[tokio::test]
async fn health_and_readiness_answer_without_a_key() {
    let app = spawn_app().await;
    for (path, status) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.json::<Value>().await.unwrap(), json!({"status": status}), "{path}");
    }
    let wrong_method = app.client.post(app.url("/healthz")).send().await.unwrap();
    assert_error(wrong_method, 405, "invalid_request", "METHOD_NOT_ALLOWED").await;
}

#[tokio::test]
async fn the_front_page_points_to_the_pages_and_every_page_has_the_favicon() {
    let app = spawn_app().await;
    let browser = app.client.get(app.url("/")).header("accept", "text/html,*/*;q=0.8").send().await.unwrap();
    assert_eq!(browser.status(), 200);
    assert!(browser.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(browser.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
    assert_eq!(browser.headers()["vary"], "Accept");
    let html = browser.text().await.unwrap();
    for link in ["href=\"/playground\"", "href=\"/console\"", "href=\"/docs\"", "/api/v1"] {
        assert!(html.contains(link), "{link} in {html}");
    }
    let index: Value = app.client.get(app.url("/")).send().await.unwrap().json().await.unwrap();
    assert_eq!((index["playground"].as_str(), index["console"].as_str()), (Some("/playground"), Some("/console")));
    assert_eq!((index["docs"].as_str(), index["api"].as_str()), (Some("/docs"), Some("/api/v1")));

    let icon = app.client.get(app.url("/favicon.ico")).send().await.unwrap();
    assert_eq!(icon.status(), 200);
    assert_eq!(icon.headers()["content-type"], "image/svg+xml");
    assert_eq!(icon.headers()["content-security-policy"], "sandbox", "an SVG opened alone runs nothing");
    assert!(icon.text().await.unwrap().starts_with("<svg"));
    for page in ["/", "/playground", "/playground/account", "/console", "/docs"] {
        let html =
            app.client.get(app.url(page)).header("accept", "text/html").send().await.unwrap().text().await.unwrap();
        assert!(html.contains("<link rel=\"icon\" href=\"/favicon.ico\""), "{page} links the favicon");
    }
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = spawn_app().await;
    let given = app.client.get(app.url("/healthz")).header("x-request-id", "trace-42").send().await.unwrap();
    assert_eq!(given.headers()["x-request-id"], "trace-42", "the request's own id is kept");
    let refused = app.get("/api/v1/jobs/nope", &app.demo_key).await;
    let generated = refused.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(generated.len() == 32 && generated.bytes().all(|b| b.is_ascii_hexdigit()), "{generated}");
    let too_long = "x".repeat(129);
    let replaced = app.client.get(app.url("/healthz")).header("x-request-id", &too_long).send().await.unwrap();
    assert_ne!(replaced.headers()["x-request-id"], too_long.as_str(), "an id over 128 characters is replaced");
}

/// How much the samples of `name` with `labels` grew from one scrape to the next.
fn growth(before: &str, after: &str, name: &str, labels: &[&str]) -> f64 {
    sample_sum(after, name, labels) - sample_sum(before, name, labels)
}

#[tokio::test]
async fn metrics_need_the_admin_token_and_move_after_a_job() {
    let app = spawn_app().await;
    assert_error(app.get("/metrics", &app.demo_key).await, 401, "unauthorized", "INVALID_API_KEY").await;
    let scrape = async || {
        let response = app.get("/metrics", genjobs_tests::ADMIN_TOKEN).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/plain; version=0.0.4");
        response.text().await.unwrap()
    };
    let before = scrape().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "counted", "n": 2})).await;
    let id = receipt["job_id"].as_str().unwrap();
    assert_eq!(app.wait_final(&app.demo_key, id).await["state"], "succeeded");
    let held = receipt["credits_held"].as_f64().unwrap();
    // The driver counts a job's end just after its commit, so a reader woken by that commit can
    // scrape a moment before the count: scrape again until it shows, as a dashboard would.
    let finished = ["state=\"succeeded\""];
    let counted = |after: &str| {
        growth(&before, after, "genjobs_jobs_finished_total", &finished) >= 1.0
            && growth(&before, after, "genjobs_credits_spent_total", &[]) >= held
    };
    let after =
        wait_until(Duration::from_secs(30), "the finished job in the metrics", scrape, |after| counted(after)).await;

    let moved = |name: &str, labels: &[&str]| growth(&before, &after, name, labels);
    let submits = ["route=\"/api/v1/images/generations\"", "status=\"202\""];
    assert!(moved("genjobs_http_requests_total", &submits) >= 1.0, "{after}");
    assert!(moved("genjobs_http_request_duration_seconds_count", &["route=\"/api/v1/images/generations\""]) >= 1.0);
    assert!(moved("genjobs_jobs_accepted_total", &[]) >= 1.0);
    assert!(moved("genjobs_jobs_finished_total", &finished) >= 1.0);
    assert!(moved("genjobs_credits_held_total", &[]) >= held && moved("genjobs_credits_spent_total", &[]) >= held);
    for kind in ["submit", "status", "result"] {
        let labels = [format!("kind=\"{kind}\""), "outcome=\"ok\"".to_owned()];
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        assert!(moved("genjobs_upstream_calls_total", &labels) >= 1.0, "{kind}: {after}");
    }
    assert!(moved("genjobs_upstream_call_duration_seconds_count", &["kind=\"status\""]) >= 1.0);
    assert!(moved("genjobs_driver_lag_seconds_count", &[]) >= 1.0);
    for series in [
        "genjobs_jobs{state=\"queued\"}",
        "genjobs_jobs{state=\"running\"}",
        "genjobs_open_connections{kind=\"long_poll\"}",
    ] {
        assert!(after.contains(series), "{series} missing: {after}");
    }
    if app.database.is_some() {
        assert!(after.contains("genjobs_db_pool_connections{pool=\"durable\",state=\"in_use\"}"), "{after}");
        assert!(after.contains("genjobs_db_pool_waiting{pool=\"durable\"}"), "{after}");
    }
    let foreign = after.lines().find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("genjobs_"));
    assert_eq!(foreign, None, "every metric is named genjobs_*");
    for kind in after.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = kind.split(' ').next().unwrap();
        assert!(after.contains(&format!("# HELP {name} ")), "{name} has no description");
    }
}

#[tokio::test]
async fn every_documented_operation_is_served_and_the_docs_load_nothing_from_elsewhere() {
    let app = spawn_app().await;
    let response = app.client.get(app.url("/api/v1/openapi.json")).send().await.unwrap();
    assert_eq!(response.status(), 200, "no key needed");
    let document: Value = response.json().await.unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    for (path, item) in document["paths"].as_object().unwrap() {
        let asset = if path.starts_with("/playground/") { "uplot.css" } else { "swagger-ui.css" };
        let concrete = path.replace("{asset}", asset).replace('{', "x").replace('}', "");
        for method in item.as_object().unwrap().keys() {
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let answer = app.client.request(method.clone(), app.url(&concrete)).send().await.unwrap();
            let status = answer.status().as_u16();
            let body = answer.text().await.unwrap_or_default();
            let unrouted = body.contains("ROUTE_NOT_FOUND") || body.contains("METHOD_NOT_ALLOWED");
            assert!(!unrouted, "{method} {path} is documented but not served: {status} {body}");
        }
    }

    let page = app.client.get(app.url("/docs")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = page.text().await.unwrap();
    let references: Vec<&str> =
        html.split(['"', '\'']).filter(|s| s.ends_with(".js") || s.ends_with(".css") || s.contains("://")).collect();
    assert!(!references.is_empty() && references.iter().all(|r| r.starts_with('/')), "{references:?}");
    assert!(html.contains("validatorUrl: null"), "the validator badge would call another host");
    for (asset, content_type) in [("swagger-ui-bundle.js", "application/javascript"), ("swagger-ui.css", "text/css")] {
        let file = app.client.get(app.url(&format!("/docs/{asset}"))).send().await.unwrap();
        assert_eq!(file.status(), 200, "{asset}");
        assert_eq!(file.headers()["content-type"], content_type);
        assert!(file.bytes().await.unwrap().len() > 10_000, "{asset} is the real file");
    }
    let missing = app.client.get(app.url("/docs/other.js")).send().await.unwrap();
    assert_error(missing, 404, "not_found", "ROUTE_NOT_FOUND").await;
}
