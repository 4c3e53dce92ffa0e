//! Webhooks to clients, end to end: a job submitted with a `webhook_url` has its end posted to a
//! receiver on this machine, signed by the Standard Webhooks scheme; failures are retried with
//! growing delays, redirects are not followed, and redeliveries repeat the same event.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use genjobs_test_wait::wait_until;
use genjobs_tests::{Answer, Received, TestApp, WebhookReceiver, assert_error, client_webhook_config, python_tools};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::spawn_app_with;

const DEADLINE: Duration = Duration::from_secs(30);

async fn hooked_app() -> TestApp {
    spawn_app_with(client_webhook_config(Duration::from_secs(10))).await
}

async fn submit_hooked(app: &TestApp, key: &str, url: &str) -> String {
    let receipt = app.submit("images", key, json!({"prompt": "a kite", "webhook_url": url})).await;
    receipt["job_id"].as_str().unwrap().to_owned()
}

pub(crate) async fn secret(app: &TestApp, key: &str) -> String {
    let response = app.get("/api/v1/account/webhook-secret", key).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["secret"].as_str().unwrap().to_owned()
}

/// Whether `received` is signed with `secret`, checked with hmac and sha2 rather than the
/// implementation that signs.
pub(crate) fn signed_with(secret: &str, received: &Received) -> bool {
    let key = STANDARD.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{}.{}.", received.header("webhook-id"), received.header("webhook-timestamp")).as_bytes());
    mac.update(&received.body);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    received.header("webhook-signature").split(' ').any(|signature| signature == expected)
}

/// The job's webhook events once `done` holds of them; panics after the deadline.
async fn events_when(app: &TestApp, key: &str, job_id: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let read = async || {
        let response = app.get(&format!("/api/v1/jobs/{job_id}/webhooks"), key).await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        body["data"].as_array().unwrap().clone()
    };
    wait_until(DEADLINE, &format!("the webhook events of {job_id}"), read, |events| done(events)).await
}

fn delivered(events: &[Value]) -> bool {
    events.first().is_some_and(|e| !e["delivered_at"].is_null())
}

fn without_output_links(mut job: Value) -> Value {
    for output in job["outputs"].as_array_mut().into_iter().flatten() {
        output["url"] = Value::Null;
    }
    job
}

/// The end of a job is posted once, signed with the account's secret, its body the job as the
/// API shows it; the deliveries list shows the attempt.
#[tokio::test]
async fn a_finished_job_is_posted_signed_with_the_job_as_its_data() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let user = app.create_user(100, json!({})).await;
    let job_id = submit_hooked(&app, &user.key, &receiver.url).await;
    let posted = receiver.wait_for(1, DEADLINE).await.remove(0);
    let job = app.job(&user.key, &job_id, 0).await;

    assert_eq!(posted.header("content-type"), "application/json");
    assert!(posted.header("webhook-id").starts_with("msg_"), "{:?}", posted.headers);
    let sent_at: i64 = posted.header("webhook-timestamp").parse().unwrap();
    assert!((time::OffsetDateTime::now_utc().unix_timestamp() - sent_at).abs() < 60);
    assert!(signed_with(&secret(&app, &user.key).await, &posted), "{:?}", posted.headers);
    let body = posted.json();
    assert_eq!(body["type"], "job.succeeded");
    assert_eq!(body["timestamp"], job["finished_at"]);
    // Output links are minted, with their expiry, at every read; the rest is the job itself.
    assert_eq!(without_output_links(body["data"].clone()), without_output_links(job));

    let events = events_when(&app, &user.key, &job_id, delivered).await;
    assert_eq!(events.len(), 1);
    let event = &events[0];
    assert_eq!(
        (event["id"].as_str(), event["type"].as_str()),
        (Some(posted.header("webhook-id")), Some("job.succeeded"))
    );
    assert_eq!(event["url"], receiver.url.as_str());
    assert_eq!(event["attempts"].as_array().unwrap().len(), 1);
    assert_eq!((event["attempts"][0]["status"].as_u64(), event["attempts"][0]["error"].is_null()), (Some(200), true));
    assert!(event["next_attempt_at"].is_null());

    let quiet = app.submit("images", &user.key, json!({"prompt": "no hook"})).await;
    let quiet = quiet["job_id"].as_str().unwrap();
    app.wait_final(&user.key, quiet).await;
    assert!(events_when(&app, &user.key, quiet, |_| true).await.is_empty());
}

/// Failed answers are retried, each wait about twice the last (50 ms first here, ±20 %), with the
/// same id and body every time; every attempt is recorded.
#[tokio::test]
async fn failed_deliveries_are_retried_with_growing_delays_and_the_same_event() {
    let script = vec![Answer::Status(500), Answer::Status(503), Answer::Status(404)];
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(script).await);
    let user = app.create_user(100, json!({})).await;
    let job_id = submit_hooked(&app, &user.key, &receiver.url).await;
    let posts = receiver.wait_for(4, DEADLINE).await;
    assert!(posts.iter().all(|p| p.header("webhook-id") == posts[0].header("webhook-id") && p.body == posts[0].body));
    let gaps: Vec<Duration> = posts.windows(2).map(|w| w[1].at - w[0].at).collect();
    for (retry, gap) in gaps.iter().enumerate() {
        let nominal = Duration::from_millis(50 << retry);
        assert!(*gap >= nominal.mul_f64(0.8), "retry {}: {gap:?} < 80 % of {nominal:?} ({gaps:?})", retry + 1);
    }
    assert!(gaps[2] > gaps[0], "waits grow: {gaps:?}");

    let events = events_when(&app, &user.key, &job_id, delivered).await;
    let statuses: Vec<Option<u64>> =
        events[0]["attempts"].as_array().unwrap().iter().map(|a| a["status"].as_u64()).collect();
    assert_eq!(statuses, [Some(500), Some(503), Some(404), Some(200)]);
    assert_eq!(events[0]["attempts"][0]["error"], "http_status", "a class, not the receiver's words");
}

/// A redelivery posts the same event again (same id, same body), and is recorded.
#[tokio::test]
async fn a_redelivery_posts_the_same_event_again() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let user = app.create_user(100, json!({})).await;
    let job_id = submit_hooked(&app, &user.key, &receiver.url).await;
    let events = events_when(&app, &user.key, &job_id, delivered).await;
    let event_id = events[0]["id"].as_str().unwrap();

    let path = format!("/api/v1/jobs/{job_id}/webhooks/{event_id}/redeliver");
    assert_eq!(app.post(&path, &user.key, &json!({})).await.status(), 202);
    let posts = receiver.wait_for(2, DEADLINE).await;
    assert_eq!((posts[1].header("webhook-id"), &posts[1].body), (event_id, &posts[0].body));
    events_when(&app, &user.key, &job_id, |e| e[0]["attempts"].as_array().is_some_and(|a| a.len() == 2)).await;

    let unknown = format!("/api/v1/jobs/{job_id}/webhooks/msg_00000000000000000000000000000000/redeliver");
    assert_error(app.post(&unknown, &user.key, &json!({})).await, 404, "not_found", "WEBHOOK_EVENT_NOT_FOUND").await;
}

/// The secret is the same until rotated; after a rotation, webhooks are signed with the new one
/// and no longer with the old.
#[tokio::test]
async fn a_rotated_secret_signs_from_then_on() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let user = app.create_user(100, json!({})).await;
    let first = secret(&app, &user.key).await;
    assert!(first.starts_with("whsec_"));
    assert_eq!(secret(&app, &user.key).await, first, "stable until rotated");
    let response = app.post("/api/v1/account/webhook-secret/rotate", &user.key, &json!({})).await;
    assert_eq!(response.status(), 200);
    let rotated = response.json::<Value>().await.unwrap()["secret"].as_str().unwrap().to_owned();
    assert_ne!(rotated, first);
    assert_eq!(secret(&app, &user.key).await, rotated);

    submit_hooked(&app, &user.key, &receiver.url).await;
    let posted = receiver.wait_for(1, DEADLINE).await.remove(0);
    assert!(signed_with(&rotated, &posted));
    assert!(!signed_with(&first, &posted), "the old secret no longer signs");
}

/// Another user's job's webhooks answer as the job itself does: 403.
#[tokio::test]
async fn another_users_job_webhooks_are_forbidden() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let (owner, other) = (app.create_user(100, json!({})).await, app.create_user(100, json!({})).await);
    let job_id = submit_hooked(&app, &owner.key, &receiver.url).await;
    let events = events_when(&app, &owner.key, &job_id, delivered).await;
    let event_id = events[0]["id"].as_str().unwrap();
    let job = app.get(&format!("/api/v1/jobs/{job_id}"), &other.key).await;
    assert_error(job, 403, "forbidden", "FORBIDDEN").await;
    let list = app.get(&format!("/api/v1/jobs/{job_id}/webhooks"), &other.key).await;
    assert_error(list, 403, "forbidden", "FORBIDDEN").await;
    let redeliver = format!("/api/v1/jobs/{job_id}/webhooks/{event_id}/redeliver");
    assert_error(app.post(&redeliver, &other.key, &json!({})).await, 403, "forbidden", "FORBIDDEN").await;
}

/// URLs that are malformed, not http(s), too long, or whose host is or resolves to a private,
/// loopback or link-local address are refused on both endpoints, naming `webhook_url`; the
/// quotes check their form too.
#[tokio::test]
async fn private_and_malformed_webhook_urls_are_refused() {
    let app = spawn_app_with(genjobs_tests::fast_config()).await;
    let long = format!("https://example.com/{}", "a".repeat(2048));
    let malformed = ["not a url", "ftp://example.com/hook", "https://", "/relative/hook", long.as_str()];
    let private = [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.0.0.7/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/hook",
        "http://192.0.2.2:8080/hook",
        "http://192.0.0.8/hook",
        "http://198.18.0.1/hook",
        "http://198.51.100.7/hook",
        "http://203.0.113.9/hook",
        "http://240.0.0.1/hook",
        "http://0.1.2.3/hook",
        "http://[64:ff9b::a00:1]/hook",
        "http://[2002:a00:1::1]/hook",
        "http://[::10.0.0.1]/hook",
        "http://[fec0::1]/hook",
    ];
    for (endpoint, url) in ["/api/v1/images/generations", "/api/v1/video/generations"]
        .into_iter()
        .flat_map(|endpoint| malformed.iter().chain(&private).map(move |url| (endpoint, *url)))
    {
        let response = app.post(endpoint, &app.demo_key, &json!({"prompt": "x", "webhook_url": url})).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], "webhook_url", "{endpoint} {url}");
    }
    let quote = "/api/v1/images/generations/quote";
    for url in malformed {
        let response = app.post(quote, &app.demo_key, &json!({"prompt": "x", "webhook_url": url})).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], "webhook_url", "{url}");
    }
    let accepted =
        app.post(quote, &app.demo_key, &json!({"prompt": "x", "webhook_url": "https://example.com/h"})).await;
    assert_eq!(accepted.status(), 200, "quotes take a webhook_url");
    let account: Value = app.get("/api/v1/account", &app.demo_key).await.json().await.unwrap();
    assert_eq!(account["credits_held"], 0, "nothing was accepted");
}

/// A redirect is an answer, not a delivery: the location is never requested, and the event is
/// retried at its own URL.
#[tokio::test]
async fn redirects_are_not_followed() {
    let elsewhere = WebhookReceiver::start(vec![]).await;
    let receiver = WebhookReceiver::start(vec![Answer::Redirect(elsewhere.url.clone())]).await;
    let app = hooked_app().await;
    let user = app.create_user(100, json!({})).await;
    let job_id = submit_hooked(&app, &user.key, &receiver.url).await;
    let events = events_when(&app, &user.key, &job_id, delivered).await;
    let attempts = events[0]["attempts"].as_array().unwrap();
    assert_eq!((attempts[0]["status"].as_u64(), attempts[1]["status"].as_u64()), (Some(302), Some(200)));
    assert_eq!(attempts[0]["error"], "http_status");
    assert_eq!(receiver.received().len(), 2);
    assert!(elsewhere.received().is_empty(), "the redirect's location was requested");
}

/// A receiver that never answers is given up on after the attempt's timeout (shortened here),
/// recorded with no status, and retried.
#[tokio::test]
async fn a_receiver_that_never_answers_is_retried() {
    let app = spawn_app_with(client_webhook_config(Duration::from_millis(400))).await;
    let receiver = WebhookReceiver::start(vec![Answer::Silence]).await;
    let user = app.create_user(100, json!({})).await;
    let job_id = submit_hooked(&app, &user.key, &receiver.url).await;
    let events = events_when(&app, &user.key, &job_id, delivered).await;
    let attempts = events[0]["attempts"].as_array().unwrap();
    assert!(attempts[0]["status"].is_null(), "{attempts:?}");
    assert_eq!(attempts[0]["error"], "timeout");
    assert_eq!(attempts.last().unwrap()["status"], 200);
}

/// A receiver nobody listens at is recorded as `connect_failed`: the class, never the operating
/// system's words, which would tell a refused port from an unreachable host.
#[tokio::test]
async fn an_unreachable_receiver_is_recorded_as_a_class() {
    let app = hooked_app().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let user = app.create_user(100, json!({})).await;
    let job_id = submit_hooked(&app, &user.key, &format!("http://{closed}/hook")).await;
    let tried =
        |events: &[Value]| events.first().is_some_and(|e| e["attempts"].as_array().is_some_and(|a| !a.is_empty()));
    let events = events_when(&app, &user.key, &job_id, tried).await;
    let attempt = &events[0]["attempts"][0];
    assert_eq!((attempt["status"].clone(), attempt["error"].clone()), (Value::Null, json!("connect_failed")));
}

/// A receiver that never answers holds only its own host's slots: another user's webhook, due
/// while a score of events wait on it, is delivered at once.
#[tokio::test]
async fn a_dead_receiver_does_not_delay_other_users() {
    let app = hooked_app().await;
    let (dead, alive) = (WebhookReceiver::start(vec![Answer::Silence; 40]).await, WebhookReceiver::start(vec![]).await);
    let busy = app.create_user(1000, json!({"max_concurrent_jobs": 40})).await;
    let other = app.create_user(100, json!({})).await;
    for _ in 0..20 {
        submit_hooked(&app, &busy.key, &dead.url).await;
    }
    dead.wait_for(8, DEADLINE).await;
    let job_id = submit_hooked(&app, &other.key, &alive.url).await;
    let finished = Instant::now();
    app.wait_final(&other.key, &job_id).await;
    alive.wait_for(1, Duration::from_secs(5)).await;
    assert!(finished.elapsed() < Duration::from_secs(5), "{:?}", finished.elapsed());
    assert!(dead.received().len() < 20, "the dead host's own slots are bounded");
}

/// An independent implementation of the scheme, the Standard Webhooks Python package a real
/// receiver would use, verifies what genjobs sends: a success and a cancel.
#[tokio::test]
async fn standard_webhooks_in_python_verifies_the_signatures() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let user = app.create_user(100, json!({})).await;
    submit_hooked(&app, &user.key, &receiver.url).await;
    receiver.wait_for(1, DEADLINE).await;
    let canceled = submit_hooked(&app, &user.key, &receiver.url).await;
    app.post(&format!("/api/v1/jobs/{canceled}/cancel"), &user.key, &json!({})).await;
    let posts = receiver.wait_for(2, DEADLINE).await;
    let deliveries: Vec<Value> = posts
        .iter()
        .map(|p| json!({"headers": p.headers, "body": String::from_utf8(p.body.clone()).unwrap()}))
        .collect();
    let input = json!({"secret": secret(&app, &user.key).await, "deliveries": deliveries}).to_string();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python/verify_webhook.py");
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = std::process::Command::new(python_tools())
            .arg(&script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        child.stdin.take().expect("stdin").write_all(input.as_bytes())?;
        child.wait_with_output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(report["verified"], json!(["job.succeeded", "job.canceled"]));
}

/// genjobs-client covers the webhook API: a submission with a URL, the secret and its rotation,
/// a job's deliveries and a redelivery.
#[tokio::test]
async fn the_rust_client_reads_and_redelivers_webhooks() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let user = app.create_user(100, json!({})).await;
    let client = genjobs_client::Client::new(app.base.clone(), user.key.clone()).unwrap();
    let first = client.webhook_secret().await.unwrap().secret;
    let rotated = client.rotate_webhook_secret().await.unwrap().secret;
    assert_ne!(first, rotated);
    let request = genjobs_client::ImageRequest {
        webhook_url: Some(receiver.url.clone()),
        ..genjobs_client::ImageRequest::new("a kite")
    };
    let receipt = client.submit_image(&request, None).await.unwrap();
    let posted = receiver.wait_for(1, DEADLINE).await.remove(0);
    assert!(signed_with(&rotated, &posted));
    events_when(&app, &user.key, &receipt.job_id, delivered).await;
    let deliveries = client.job_webhooks(&receipt.job_id).await.unwrap();
    assert_eq!((deliveries.len(), deliveries[0].event_type.as_str()), (1, "job.succeeded"));
    assert_eq!(deliveries[0].attempts[0].status, Some(200));
    client.redeliver_webhook(&receipt.job_id, &deliveries[0].id).await.unwrap();
    assert_eq!(receiver.wait_for(2, DEADLINE).await[1].header("webhook-id"), deliveries[0].id);
    let refused = client.redeliver_webhook(&receipt.job_id, "msg_nope").await.unwrap_err();
    assert_eq!(refused.api().map(|a| a.status), Some(404));
}
