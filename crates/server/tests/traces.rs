//! Traces over OTLP from the binary itself, to a collector stub: a submission's spans, from its
//! HTTP request through the provider calls and the final transition to the client webhook's
//! delivery, each with `genjobs.job_id`, in the trace of the client's `traceparent`; as JSON when
//! asked, as protobuf by default, within 10 s; and JSON log lines with the `trace_id`.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use genjobs_test_wait::{eventually, wait_until};
use serde_json::{Value, json};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// What the collector stub received on `/v1/traces`: each request's content type and body.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A collector stub taking OTLP/HTTP exports on `/v1/traces`, and a client webhook receiver on
/// `/hook`; its base URL.
fn collector(received: Received) -> String {
    let server = HttpServer::new(move || {
        let received = Arc::clone(&received);
        App::new()
            .route(
                "/v1/traces",
                web::post().to(move |req: HttpRequest, body: web::Bytes| {
                    let received = Arc::clone(&received);
                    async move {
                        let kind = req.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
                        received.lock().unwrap().push((kind.to_owned(), body.to_vec()));
                        HttpResponse::Ok().finish()
                    }
                }),
            )
            .route("/hook", web::post().to(|| async { HttpResponse::Ok().finish() }))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .unwrap();
    let base = format!("http://{}", server.addrs()[0]);
    tokio::spawn(server.run());
    base
}

/// `genjobs` on the embedded default with `vars`; its base URL and the demo user's key.
fn serve(vars: &[(&str, &str)]) -> (Child, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .env_clear()
        .env("GENJOBS_BIND", "127.0.0.1:0")
        .env("GENJOBS_SIM_PORT", "0")
        .env("GENJOBS_LOG_FORMAT", "json")
        .env("GENJOBS_SIM_QUEUE_MS", "50")
        .env("GENJOBS_SIM_RUN_MS", "200")
        .envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines: Vec<String> = Vec::new();
    while !lines.last().is_some_and(|l| l.starts_with("upstream: ")) {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "genjobs exited early: {lines:?}");
        lines.push(line.trim_end().to_owned());
    }
    let after = |prefix: &str| lines.iter().find_map(|l| l.strip_prefix(prefix)).unwrap().trim().to_owned();
    (child, after("genjobs listening on "), after("demo user API key: "))
}

/// Submits an image job in the client's trace, its end posted to `hook`; waits until it is
/// final, in the same trace.
async fn submit_in_trace(base: &str, key: &str, hook: &str) -> String {
    let client = reqwest::Client::new();
    let receipt: Value = client
        .post(format!("{base}/api/v1/images/generations"))
        .bearer_auth(key)
        .header("traceparent", format!("00-{TRACE}-{CLIENT_SPAN}-01"))
        .json(&json!({"prompt": "a traced fox", "webhook_url": hook}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = receipt["job_id"].as_str().unwrap().to_owned();
    let job: Value = client
        .get(format!("{base}/api/v1/jobs/{id}?wait=20"))
        .bearer_auth(key)
        .header("traceparent", format!("00-{TRACE}-{CLIENT_SPAN}-01"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(job["state"], "succeeded", "{job}");
    id
}

/// A span of an OTLP/JSON export: its name, trace, parent and `genjobs.job_id`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    name: String,
    trace: String,
    parent: String,
    job_id: Option<String>,
}

fn spans_of(export: &Value) -> Vec<Span> {
    let mut spans = Vec::new();
    for resource in export["resourceSpans"].as_array().into_iter().flatten() {
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                let job_id = span["attributes"].as_array().into_iter().flatten().find_map(|a| {
                    (a["key"] == "genjobs.job_id")
                        .then(|| a["value"]["stringValue"].as_str().map(str::to_owned))
                        .flatten()
                });
                spans.push(Span {
                    name: span["name"].as_str().unwrap_or("").to_owned(),
                    trace: span["traceId"].as_str().unwrap_or("").to_lowercase(),
                    parent: span["parentSpanId"].as_str().unwrap_or("").to_lowercase(),
                    job_id,
                });
            }
        }
    }
    spans
}

fn service_names(export: &Value) -> Vec<String> {
    let resources = export["resourceSpans"].as_array().into_iter().flatten();
    resources
        .flat_map(|r| r["resource"]["attributes"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["key"] == "service.name")
        .filter_map(|a| a["value"]["stringValue"].as_str().map(str::to_owned))
        .collect()
}

/// Stops `child` with SIGTERM and returns what it logged.
fn stop(mut child: Child) -> String {
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let mut logs = String::new();
    child.stderr.take().unwrap().read_to_string(&mut logs).unwrap();
    child.wait().unwrap();
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submissions_spans_reach_the_collector_in_the_clients_trace() {
    let received: Received = Arc::default();
    let base_of_collector = collector(Arc::clone(&received));
    let (child, base, key) = serve(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &base_of_collector),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ("OTEL_SERVICE_NAME", "genjobs-under-test"),
        ("GENJOBS_WEBHOOK_ALLOW_PRIVATE", "true"),
    ]);
    let id = submit_in_trace(&base, &key, &format!("{base_of_collector}/hook")).await;

    let wanted = ["http.request", "job.step", "provider.call", "job.transition", "webhook.delivery"];
    let exported = async || {
        let exports: Vec<Value> = received
            .lock()
            .unwrap()
            .iter()
            .inspect(|(kind, _)| assert!(kind.starts_with("application/json"), "{kind}"))
            .map(|(_, body)| serde_json::from_slice(body).unwrap())
            .collect();
        let spans: Vec<Span> = exports.iter().flat_map(spans_of).filter(|s| s.job_id.as_deref() == Some(&id)).collect();
        (spans, exports.iter().flat_map(service_names).collect::<BTreeSet<_>>())
    };
    let (spans, services) =
        wait_until(Duration::from_secs(10), &format!("every span of job {id} exported"), exported, |(spans, _)| {
            let names: BTreeSet<&str> = spans.iter().map(|s| s.name.as_str()).collect();
            wanted.iter().all(|name| names.contains(name))
        })
        .await;
    assert!(spans.iter().all(|s| s.trace == TRACE), "every span in the client's trace: {spans:?}");
    let requests: Vec<&Span> = spans.iter().filter(|s| s.name == "http.request").collect();
    assert!(requests.iter().all(|r| r.parent == CLIENT_SPAN), "each request continues the client's span: {requests:?}");
    assert_eq!(services, BTreeSet::from(["genjobs-under-test".to_owned()]), "OTEL_SERVICE_NAME is honoured");

    let logs = stop(child);
    let accepted = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["message"] == "job accepted" && line["job_id"] == id.as_str())
        .unwrap_or_else(|| panic!("no `job accepted` line in {logs}"));
    assert_eq!(accepted["trace_id"], TRACE, "{accepted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_go_as_protobuf_by_default_within_10_s() {
    let received: Received = Arc::default();
    let base_of_collector = collector(Arc::clone(&received));
    let (child, base, key) =
        serve(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &base_of_collector), ("GENJOBS_WEBHOOK_ALLOW_PRIVATE", "true")]);
    let id = submit_in_trace(&base, &key, &format!("{base_of_collector}/hook")).await;
    let carries = |body: &[u8], text: &str| body.windows(text.len()).any(|w| w == text.as_bytes());
    let seen = eventually(Duration::from_secs(10), async || {
        received.lock().unwrap().iter().any(|(kind, body)| {
            kind.starts_with("application/x-protobuf") && carries(body, "genjobs.job_id") && carries(body, &id)
        })
    })
    .await;
    assert!(seen, "no protobuf export naming job {id} within 10 s");
    stop(child);
}

/// Where `value` (a log line, or any value within it) holds Rust's debug text: of an `Option`
/// (`Some(4)`, `None`) rather than the value itself or nothing, or of a struct (`Change { … }`)
/// rather than its fields.
fn debug_text(value: &Value) -> Option<String> {
    let struct_debug = |text: &str| {
        text.split_once(" { ").is_some_and(|(name, _)| name.chars().all(char::is_alphanumeric)) && text.ends_with('}')
    };
    match value {
        Value::String(text) if text == "None" || text.starts_with("Some(") || struct_debug(text) => Some(text.clone()),
        Value::Object(fields) => fields.values().find_map(debug_text),
        Value::Array(items) => items.iter().find_map(debug_text),
        _ => None,
    }
}

/// A job that succeeds and one that fails, a user's change and a model's put: the JSON log
/// gives their values as plain JSON (credits as a number, an error code as its name), never as
/// Rust's debug text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_values_are_plain_json_not_rusts_debug_text() {
    const ADMIN: &str = "gja_log_values_are_plain_json_0123456789";
    let (child, base, key) = serve(&[("GENJOBS_ADMIN_TOKEN", ADMIN), ("GENJOBS_POLL_INTERVAL_MS", "50")]);
    let client = reqwest::Client::new();
    let call = async |request: reqwest::RequestBuilder| -> Value {
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{response:?}");
        response.json().await.unwrap_or(Value::Null)
    };
    let mut ended = Vec::new();
    for prompt in ["a plain fox", "a broken fox [sim:fail]"] {
        let submit = client.post(format!("{base}/api/v1/images/generations")).bearer_auth(&key);
        let receipt = call(submit.json(&json!({ "prompt": prompt }))).await;
        let id = receipt["job_id"].as_str().unwrap().to_owned();
        let job = call(client.get(format!("{base}/api/v1/jobs/{id}?wait=20")).bearer_auth(&key)).await;
        ended.push((id, job["state"].clone()));
    }
    let account = call(client.get(format!("{base}/api/v1/account")).bearer_auth(&key)).await;
    let user = format!("{base}/api/admin/users/{}", account["user_id"].as_str().unwrap());
    call(client.patch(user).bearer_auth(ADMIN).json(&json!({"rate_limit_per_minute": 100}))).await;
    let models = call(client.get(format!("{base}/api/admin/models")).bearer_auth(ADMIN)).await;
    let model = &models["data"][0];
    let put = client.put(format!("{base}/api/admin/models/{}", model["id"].as_str().unwrap()));
    call(put.bearer_auth(ADMIN).json(model)).await;

    let logs = stop(child);
    let lines: Vec<Value> = logs.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let debug: Vec<String> = lines.iter().filter_map(debug_text).collect();
    assert!(debug.is_empty(), "Rust's debug text in the log: {debug:?}\n{logs}");
    assert_eq!(ended.iter().map(|(_, state)| state.as_str().unwrap()).collect::<Vec<_>>(), ["succeeded", "failed"]);
    let line_of = |(id, state): &(String, Value)| {
        let line = lines.iter().find(|line| line["job_id"] == id.as_str() && line["state"] == *state);
        line.cloned().unwrap_or_else(|| panic!("no line of job {id} {state}: {logs}"))
    };
    let (succeeded, failed) = (line_of(&ended[0]), line_of(&ended[1]));
    assert!(succeeded["credits_actual"].is_u64(), "{succeeded}");
    assert_eq!(failed["error_code"], "UPSTREAM_FAILED", "{failed}");
    let line_saying = |message: &str| lines.iter().find(|line| line["message"] == message).cloned().unwrap_or_default();
    assert_eq!(line_saying("user changed")["rate_limit_per_minute"], 100, "{logs}");
    assert_eq!(line_saying("catalog model put")["outcome"], "replaced", "{logs}");
}
