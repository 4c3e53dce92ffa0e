use std::time::{Duration, Instant};

use crate::{spawn_app, spawn_app_with};
use genjobs::Config;
use genjobs_http::HttpSettings;
use genjobs_tests::snapshot;
use genjobs_tests::{fast_config, parse_sse, read_to_end};
use genjobs_upstream_sim::SimConfig;
use serde_json::{Value, json};

#[tokio::test]
async fn a_stream_sends_progress_then_done_and_closes() {
    let app = spawn_app_with({
        let config = fast_config();
        Config { simulator: SimConfig { run: Duration::from_millis(600), ..config.simulator }, ..config }
    })
    .await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "watch me"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    let (headers, text) = app.read_stream(id, &app.demo_key, Duration::from_secs(20)).await;
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["x-accel-buffering"], "no");
    assert!(headers.get("content-encoding").is_none_or(|v| v == "identity"));
    assert!(text.starts_with("retry:"), "the first bytes carry a retry hint: {text}");

    let events: Vec<_> = parse_sse(&text).into_iter().filter(|e| e.event.is_some()).collect();
    let (last, progress) = events.split_last().expect("events");
    assert!(progress.len() >= 2, "progress about every poll interval: {text}");
    let mut previous = 0;
    for event in progress {
        assert_eq!(event.event.as_deref(), Some("progress"));
        assert!(event.id.is_some());
        let data = event.data.as_ref().expect("one JSON data line");
        assert!(data["outputs"].is_null() && data["error"].is_null());
        assert!(["queued", "running"].contains(&data["state"].as_str().unwrap()));
        let progress = data["progress"].as_u64().unwrap();
        assert!(progress >= previous && progress < 100, "never decreasing, below 100: {text}");
        previous = progress;
    }
    assert_eq!(last.event.as_deref(), Some("done"));
    let data = last.data.as_ref().unwrap();
    assert_eq!((data["state"].as_str(), data["progress"].as_u64()), (Some("succeeded"), Some(100)));
    assert!(data["error"].is_null() && data["outputs"].as_array().is_some_and(|o| o.len() == 1));
    let link = data["outputs"][0]["url"].as_str().unwrap();
    assert!(link.starts_with(&app.url("/api/v1/files/")) && link.contains("?expires="), "a signed link: {link}");
    snapshot!("done_event", data, {
        ".outputs[].url" => "[signed link]",
        ".outputs[].meta.upstream_url" => "[provider url]",
        ".outputs[].meta.size_bytes" => "[bytes]",
    });
}

#[tokio::test]
async fn a_final_job_gets_its_event_at_once_and_the_stream_closes() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "done"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    app.wait_final(&app.demo_key, id).await;
    let started = Instant::now();
    let (_, text) = app.read_stream(id, &app.demo_key, Duration::from_secs(5)).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    let events: Vec<_> = parse_sse(&text).into_iter().filter(|e| e.event.is_some()).collect();
    assert_eq!(events.len(), 1, "{text}");
    assert_eq!(events[0].event.as_deref(), Some("done"));
}

#[tokio::test]
async fn a_failed_or_canceled_job_ends_with_an_error_event() {
    let app = spawn_app().await;
    let failing = app.submit("images", &app.demo_key, json!({"prompt": "boom [sim:fail]"})).await;
    let (_, text) = app.read_stream(failing["job_id"].as_str().unwrap(), &app.demo_key, Duration::from_secs(20)).await;
    let last = parse_sse(&text).into_iter().rev().find(|e| e.event.is_some()).unwrap();
    assert_eq!(last.event.as_deref(), Some("error"));
    let data = last.data.unwrap();
    assert_eq!((data["state"].as_str(), data["error"]["code"].as_str()), (Some("failed"), Some("UPSTREAM_FAILED")));
    assert!(data["outputs"].is_null());

    let hanging = app.submit("images", &app.demo_key, json!({"prompt": "wait [sim:hang]"})).await;
    let id = hanging["job_id"].as_str().unwrap();
    let stream = app.open_stream(id, &app.demo_key).await;
    let canceled = app.post(&format!("/api/v1/jobs/{id}/cancel"), &app.demo_key, &json!({})).await;
    assert_eq!(canceled.status(), 200);
    let text = read_to_end(stream, Duration::from_secs(20)).await;
    let last = parse_sse(&text).into_iter().rev().find(|e| e.event.is_some()).unwrap();
    assert_eq!(last.event.as_deref(), Some("error"));
    assert_eq!(last.data.unwrap()["error"]["code"], "JOB_CANCELED");
}

#[tokio::test]
async fn a_stream_closes_after_its_lifetime_and_resumes_on_reconnect() {
    let app = spawn_app_with({
        let config = fast_config();
        Config { http: HttpSettings { stream_max: Duration::from_secs(1), ..config.http }, ..config }
    })
    .await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "forever [sim:hang]"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    for _ in 0..2 {
        let started = Instant::now();
        let (_, text) = app.read_stream(id, &app.demo_key, Duration::from_secs(10)).await;
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4), "{elapsed:?}");
        let events: Vec<_> = parse_sse(&text).into_iter().filter(|e| e.event.is_some()).collect();
        assert!(events.iter().all(|e| e.event.as_deref() == Some("progress")), "{text}");
        assert!(!events.is_empty());
    }
}

#[tokio::test]
async fn an_idle_stream_carries_keep_alive_comments() {
    let config = fast_config().with_poll_interval(Duration::from_secs(5));
    let http = HttpSettings { keep_alive: Duration::from_secs(1), stream_max: Duration::from_secs(3), ..config.http };
    let config = Config { http, ..config };
    let app = spawn_app_with(config).await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "idle [sim:hang]"})).await;
    let (_, text) = app.read_stream(receipt["job_id"].as_str().unwrap(), &app.demo_key, Duration::from_secs(10)).await;
    let comments = parse_sse(&text).into_iter().filter(|e| e.comment.as_deref() == Some("keep-alive")).count();
    assert!(comments >= 2, "{text}");
}

#[tokio::test]
async fn waiters_do_not_multiply_upstream_polls() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "popular [sim:run=1000]"})).await;
    let id = receipt["job_id"].as_str().unwrap().to_owned();
    let waiters: Vec<_> = (0..20)
        .map(|i| {
            let (client, key) = (app.client.clone(), app.demo_key.clone());
            let url = if i % 2 == 0 {
                app.url(&format!("/api/v1/jobs/{id}?wait=20"))
            } else {
                app.url(&format!("/api/v1/jobs/{id}/stream"))
            };
            tokio::spawn(async move { client.get(url).bearer_auth(key).send().await.unwrap().text().await.unwrap() })
        })
        .collect();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    let stats: Value = app.sim_stats().await;
    let polls = stats["requests"].as_object().unwrap().values().map(|r| r["status"].as_u64().unwrap_or(0)).sum::<u64>();
    // About 1.1 s of queue and run at one poll per 50 ms: ~22 polls whatever the number of waiters.
    assert!(polls <= 40, "{polls} status calls for one job with 20 waiters");
}
