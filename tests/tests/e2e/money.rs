//! Money safety from outside: `extra` can never raise the bill, a quote is exactly the hold a
//! submission would make, and a storm of submissions and cancels refuses each request for the
//! reason that was true when it was checked.

use genjobs_tests::{TestApp, assert_error};
use serde_json::{Value, json};

use crate::spawn_app;

async fn account(app: &TestApp, key: &str) -> Value {
    app.get("/api/v1/account", key).await.json().await.unwrap()
}

#[tokio::test]
async fn extra_may_not_set_what_the_service_derives_or_the_price_depends_on() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let cases = [
        (
            "images",
            json!({"model": "nano-banana", "prompt": "a", "n": 1, "extra": {"num_images": 4}}),
            "extra.num_images",
        ),
        (
            "images",
            json!({"model": "ideogram-v3", "prompt": "a", "extra": {"image_size": "square_hd"}}),
            "extra.image_size",
        ),
        ("images", json!({"model": "flux-pro", "prompt": "a", "extra": {"seed": 1}}), "extra.seed"),
        (
            "images",
            json!({"model": "nano-banana", "prompt": "a", "extra": {"image_urls": ["https://a.test/b.png"]}}),
            "extra.image_urls",
        ),
        ("video", json!({"prompt": "a", "resolution": "720p", "extra": {"duration": "15"}}), "extra.duration"),
        ("video", json!({"prompt": "a", "resolution": "720p", "extra": {"resolution": "1080p"}}), "extra.resolution"),
        ("video", json!({"model": "kling-2.1-master", "prompt": "a", "extra": {"prompt": "other"}}), "extra.prompt"),
    ];
    for (endpoint, body, param) in cases {
        for path in [format!("/api/v1/{endpoint}/generations"), format!("/api/v1/{endpoint}/generations/quote")] {
            let response = app.post(&path, &user.key, &body).await;
            let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
            assert_eq!(error["param"], param, "{path} {body}");
        }
    }
    let account = account(&app, &user.key).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_held"].as_u64()), (Some(100), Some(0)));
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    assert_eq!(jobs["data"].as_array().map(Vec::len), Some(0), "nothing was accepted");
}

#[tokio::test]
async fn a_quote_is_exactly_what_a_submission_holds() {
    let app = spawn_app().await;
    let user = app.create_user(1000, json!({})).await;
    let bodies = [
        ("images", json!({"prompt": "a fox"})),
        ("images", json!({"prompt": "a fox", "model": "ideogram-v3", "n": 3})),
        ("images", json!({"prompt": "a fox", "model": "flux-pro", "n": 2, "extra": {"safety_tolerance": "2"}})),
        ("video", json!({"prompt": "waves"})),
        ("video", json!({"prompt": "waves", "resolution": "720p", "duration_sec": 12})),
        ("video", json!({"prompt": "waves", "model": "kling-2.1-master", "duration_sec": 10})),
    ];
    for (endpoint, body) in bodies {
        let response = app.post(&format!("/api/v1/{endpoint}/generations/quote"), &user.key, &body).await;
        assert_eq!(response.status(), 200, "{body}");
        let quote: Value = response.json().await.unwrap();
        let receipt = app.submit(endpoint, &user.key, body.clone()).await;
        assert_eq!(quote["credits"], receipt["credits_held"], "{body}");
        assert_eq!(quote["model"], receipt["model"], "{body}");
        app.post(&format!("/api/v1/jobs/{}/cancel", receipt["job_id"].as_str().unwrap()), &user.key, &json!({})).await;
    }
}

#[tokio::test]
async fn a_quote_holds_nothing_needs_no_credits_and_refuses_what_a_submission_refuses() {
    let app = spawn_app().await;
    let poor = app.create_user(1, json!({"max_concurrent_jobs": 1})).await;
    let quote: Value =
        app.post("/api/v1/video/generations/quote", &poor.key, &json!({"prompt": "waves"})).await.json().await.unwrap();
    assert_eq!((quote["model"].as_str(), quote["credits"].as_u64()), (Some("seedance-2.0-fast"), Some(40)));
    let account = account(&app, &poor.key).await;
    assert_eq!((account["credits_available"].as_u64(), account["active_jobs"].as_u64()), (Some(1), Some(0)));
    for (body, param) in [
        (json!({}), Some("prompt")),
        (json!({"prompt": "a", "duration_sec": 99}), Some("duration_sec")),
        (json!({"prompt": "a", "surprise": 1}), Some("surprise")),
    ] {
        let response = app.post("/api/v1/video/generations/quote", &poor.key, &body).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"].as_str(), param, "{body}");
    }
    let wrong_key = app.post("/api/v1/images/generations/quote", "gj_wrong", &json!({"prompt": "a"})).await;
    assert_error(wrong_key, 401, "unauthorized", "INVALID_API_KEY").await;
}

#[tokio::test]
async fn quotes_count_against_the_rate_limit() {
    let app = spawn_app().await;
    let user = app.create_user(10, json!({"rate_limit_per_minute": 3})).await;
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(app.post("/api/v1/images/generations/quote", &user.key, &json!({"prompt": "a"})).await.status());
    }
    assert!(statuses.iter().take(3).all(|s| *s == 200), "{statuses:?}");
    let limited = app.post("/api/v1/images/generations/quote", &user.key, &json!({"prompt": "a"})).await;
    assert!(limited.headers().contains_key("retry-after"));
    assert_error(limited, 429, "rate_limited", "RATE_LIMIT_EXCEEDED").await;
}

/// Many clients of one user submit and cancel at once while the user runs out of credits, far
/// below its concurrency limit: every refusal must be 402, the check that refused it, never a
/// 429 read from a later state; and the credits add up at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_submits_and_cancels_refuses_each_request_for_the_true_reason() {
    let app = spawn_app().await;
    let granted = 40;
    let user = app.create_user(granted, json!({"max_concurrent_jobs": 100, "rate_limit_per_minute": 1_000_000})).await;
    let tasks: Vec<_> = (0..24)
        .map(|_| {
            let (client, base, key) = (app.client.clone(), app.base.clone(), user.key.clone());
            tokio::spawn(async move {
                let mut refusals = Vec::new();
                for _ in 0..10 {
                    let response = client
                        .post(format!("{base}/api/v1/images/generations"))
                        .bearer_auth(&key)
                        .json(&json!({"model": "nano-banana", "prompt": "[sim:run=300] storm"}))
                        .send()
                        .await
                        .unwrap();
                    let status = response.status().as_u16();
                    let body: Value = response.json().await.unwrap();
                    if status == 202 {
                        let id = body["job_id"].as_str().unwrap();
                        client.post(format!("{base}/api/v1/jobs/{id}/cancel")).bearer_auth(&key).send().await.unwrap();
                    } else {
                        refusals.push((status, body["error"]["code"].as_str().unwrap_or_default().to_owned()));
                    }
                }
                refusals
            })
        })
        .collect();
    let mut refusals = Vec::new();
    for task in tasks {
        refusals.extend(task.await.unwrap());
    }
    assert!(
        refusals.iter().all(|(status, code)| *status == 402 && code == "NOT_ENOUGH_CREDITS"),
        "every refusal must be the credit check's: {refusals:?}"
    );
    let jobs: Value = app.get("/api/v1/jobs?limit=100", &user.key).await.json().await.unwrap();
    for job in jobs["data"].as_array().unwrap() {
        app.wait_final(&user.key, job["id"].as_str().unwrap()).await;
    }
    let account = account(&app, &user.key).await;
    let (available, held, spent) = (
        account["credits_available"].as_u64().unwrap(),
        account["credits_held"].as_u64().unwrap(),
        account["credits_spent"].as_u64().unwrap(),
    );
    assert_eq!((held, available + spent), (0, granted), "{account}");
}
