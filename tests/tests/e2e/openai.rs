//! The OpenAI-compatible edge over real HTTP: the same keys, credits and limits as `/api/v1`,
//! in OpenAI's shapes. `openai_clients` drives it with OpenAI's official Python and Node packages.

use std::time::Duration;

use base64::Engine;
use genjobs_tests::TestApp;
use serde_json::{Value, json};

use crate::spawn_app;

/// Asserts an error in OpenAI's shape, every key present; returns the `error` object.
async fn assert_openai_error(response: reqwest::Response, status: u16, param: Option<&str>) -> Value {
    assert_eq!(response.status().as_u16(), status, "status of {}", response.url());
    let body: Value = response.json().await.unwrap();
    let error = body["error"].as_object().unwrap_or_else(|| panic!("no error object: {body}"));
    for key in ["message", "type", "param", "code"] {
        assert!(error.contains_key(key), "{key} missing from {body}");
    }
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert_eq!(error["param"].as_str(), param, "{body}");
    body["error"].clone()
}

async fn account(app: &TestApp, key: &str) -> Value {
    app.get("/api/v1/account", key).await.json().await.unwrap()
}

async fn bytes_of(app: &TestApp, url: &str) -> Vec<u8> {
    let response = app.client.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    response.bytes().await.unwrap().to_vec()
}

fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let word = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    (word(16), word(20))
}

#[tokio::test]
async fn images_come_back_as_links_to_real_pngs_and_cost_what_the_native_api_charges() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let body = json!({"model": "nano-banana", "prompt": "a lighthouse", "n": 2, "size": "1024x1024"});
    let response = app.post("/openai/v1/images/generations", &user.key, &body).await;
    assert_eq!(response.status(), 200);
    let images: Value = response.json().await.unwrap();
    assert!(images["created"].as_i64().is_some_and(|t| t > 1_700_000_000), "{images}");
    let data = images["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for image in data {
        let png = bytes_of(&app, image["url"].as_str().unwrap()).await;
        let (width, height) = png_size(&png);
        assert_eq!(width, height, "1024x1024 is the model's 1:1");
    }
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    let job = &jobs["data"][0];
    assert_eq!((job["state"].as_str(), job["model"].as_str()), (Some("succeeded"), Some("nano-banana")));
    let native = app.submit("images", &user.key, json!({"model": "nano-banana", "prompt": "a", "n": 2})).await;
    assert_eq!(job["credits_held"], native["credits_held"]);
    app.wait_final(&user.key, native["job_id"].as_str().unwrap()).await;
    let account = account(&app, &user.key).await;
    assert_eq!(account["credits_spent"].as_u64(), Some(2 * job["credits_actual"].as_u64().unwrap()));
    assert_eq!(
        (account["credits_held"].as_u64(), account["credits_available"].as_u64()),
        (Some(0), Some(100 - 2 * job["credits_actual"].as_u64().unwrap()))
    );
}

#[tokio::test]
async fn b64_json_carries_the_image_bytes_at_the_nearest_aspect_ratio() {
    let app = spawn_app().await;
    let body = json!({"model": "flux-pro", "prompt": "a fox", "size": "1792x1024", "response_format": "b64_json"});
    let response = app.post("/openai/v1/images/generations", &app.demo_key, &body).await;
    assert_eq!(response.status(), 200);
    let images: Value = response.json().await.unwrap();
    assert!(images["data"][0].get("url").is_none(), "{images}");
    let png =
        base64::engine::general_purpose::STANDARD.decode(images["data"][0]["b64_json"].as_str().unwrap()).unwrap();
    let (width, height) = png_size(&png);
    assert!(width > height, "1792x1024 maps to 16:9, got {width}x{height}");
}

#[tokio::test]
async fn errors_take_openais_shape_at_the_native_statuses() {
    let app = spawn_app().await;
    let image = |prompt: &str| json!({"model": "nano-banana", "prompt": prompt});
    let wrong_key = app.post("/openai/v1/images/generations", "gj_wrong", &image("a")).await;
    assert_eq!(assert_openai_error(wrong_key, 401, None).await["code"], "invalid_api_key");
    let unknown =
        app.post("/openai/v1/images/generations", &app.demo_key, &json!({"model": "dall-e-3", "prompt": "a"})).await;
    assert_eq!(assert_openai_error(unknown, 400, Some("model")).await["type"], "invalid_request_error");
    let bad_size =
        app.post("/openai/v1/images/generations", &app.demo_key, &json!({"prompt": "a", "size": "huge"})).await;
    assert_openai_error(bad_size, 400, Some("size")).await;

    let poor = app.create_user(1, json!({})).await;
    let short = app.post("/openai/v1/images/generations", &poor.key, &image("a")).await;
    let error = assert_openai_error(short, 402, None).await;
    assert!(error["message"].as_str().unwrap().contains("needs 4 credits, 1 available"), "{error}");

    let busy = app.create_user(100, json!({"max_concurrent_jobs": 1})).await;
    let held = app.submit("images", &busy.key, image("[sim:run=3000] slow")).await;
    let limited = app.post("/openai/v1/images/generations", &busy.key, &image("b")).await;
    assert!(limited.headers().contains_key("retry-after"));
    assert_eq!(assert_openai_error(limited, 429, None).await["type"], "rate_limit_error");
    app.post(&format!("/api/v1/jobs/{}/cancel", held["job_id"].as_str().unwrap()), &busy.key, &json!({})).await;

    let video = app.get("/openai/v1/videos/not-a-job", &app.demo_key).await;
    assert_openai_error(video, 404, None).await;
    let method = app.client.delete(app.url("/openai/v1/videos")).bearer_auth(&app.demo_key).send().await.unwrap();
    assert_openai_error(method, 405, None).await;
    let variations = app.post("/openai/v1/images/variations", &app.demo_key, &json!({})).await;
    assert_eq!(assert_openai_error(variations, 404, None).await["type"], "not_found_error", "a call not answered");
}

#[tokio::test]
async fn a_failed_job_answers_an_error_and_releases_its_credits() {
    let app = spawn_app().await;
    let user = app.create_user(10, json!({})).await;
    let body = json!({"model": "nano-banana", "prompt": "[sim:fail] no luck"});
    let failed = app.post("/openai/v1/images/generations", &user.key, &body).await;
    assert_eq!(assert_openai_error(failed, 502, None).await["code"], "upstream_failed");
    let account = account(&app, &user.key).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(10), Some(0)));
}

/// A client that gives up on a synchronous image request loses nothing: the job runs to its end,
/// is charged once, and is listed among the caller's jobs.
#[tokio::test]
async fn an_image_request_that_outlives_its_client_still_runs_and_is_charged_once() {
    let app = spawn_app().await;
    let user = app.create_user(20, json!({})).await;
    let body = json!({"model": "nano-banana", "prompt": "[sim:run=1500] patient"});
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(300)).build().unwrap();
    let gave_up =
        impatient.post(app.url("/openai/v1/images/generations")).bearer_auth(&user.key).json(&body).send().await;
    assert!(gave_up.is_err_and(|e| e.is_timeout()));
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    let listed = jobs["data"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{jobs}");
    let job = app.wait_final(&user.key, listed[0]["id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let account = account(&app, &user.key).await;
    assert_eq!(account["credits_spent"], job["credits_actual"]);
    assert_eq!(
        (account["credits_held"].as_u64(), account["credits_available"].as_u64()),
        (Some(0), Some(20 - job["credits_actual"].as_u64().unwrap()))
    );
}

async fn completed_video(app: &TestApp, key: &str, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let video: Value = app.get(&format!("/openai/v1/videos/{id}"), key).await.json().await.unwrap();
        if video["status"] == "completed" || video["status"] == "failed" {
            return video;
        }
        assert!(tokio::time::Instant::now() < deadline, "video still {video}");
        // A long-poll on the native API is the condition: it answers as soon as the job is final.
        app.job(key, id, 5).await;
    }
}

#[tokio::test]
async fn a_video_is_created_retrieved_and_downloaded_as_mp4() {
    let app = spawn_app().await;
    let body = json!({"model": "seedance-2.0-fast", "prompt": "waves", "seconds": "4", "size": "1280x720"});
    let response = app.post("/openai/v1/videos", &app.demo_key, &body).await;
    assert_eq!(response.status(), 200);
    let video: Value = response.json().await.unwrap();
    assert_eq!((video["object"].as_str(), video["status"].as_str()), (Some("video"), Some("queued")));
    assert_eq!((video["seconds"].as_str(), video["size"].as_str()), (Some("4"), Some("1280x720")));
    assert!(video["created_at"].is_i64() && video["progress"].is_u64(), "{video}");
    let id = video["id"].as_str().unwrap();
    let job = app.job(&app.demo_key, id, 0).await;
    assert_eq!(job["credits_held"], 16, "4 s at 720p, as the native API holds");
    let done = completed_video(&app, &app.demo_key, id).await;
    assert_eq!((done["status"].as_str(), done["progress"].as_u64()), (Some("completed"), Some(100)));
    assert!(done["completed_at"].is_i64() && done["error"].is_null(), "{done}");
    let content = app.get(&format!("/openai/v1/videos/{id}/content"), &app.demo_key).await;
    assert_eq!(content.status(), 200);
    assert_eq!(content.headers()["content-type"], "video/mp4");
    assert_eq!(content.headers()["x-content-type-options"], "nosniff");
    assert_eq!(content.headers()["content-security-policy"], "sandbox");
    let mp4 = content.bytes().await.unwrap();
    assert_eq!(&mp4[4..8], b"ftyp", "an MP4 starts with its ftyp box");
    let ranged = app
        .client
        .get(app.url(&format!("/openai/v1/videos/{id}/content")))
        .bearer_auth(&app.demo_key)
        .header("range", "bytes=4-7")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.headers()["content-range"].to_str().unwrap(), format!("bytes 4-7/{}", mp4.len()));
    assert_eq!(ranged.bytes().await.unwrap(), mp4.slice(4..8));
    let thumbnail = app.get(&format!("/openai/v1/videos/{id}/content?variant=thumbnail"), &app.demo_key).await;
    assert_openai_error(thumbnail, 400, Some("variant")).await;
}

#[tokio::test]
async fn a_video_form_as_openais_clients_send_it_is_accepted() {
    let app = spawn_app().await;
    let boundary = "genjobs-test-boundary";
    let part = |name: &str, value: &str| {
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
    };
    let form = [
        part("prompt", "a calm sea"),
        part("model", "seedance-2.0-fast"),
        part("seconds", "8"),
        part("size", "720x1280"),
    ]
    .concat()
        + &format!("--{boundary}--\r\n");
    let response = app
        .client
        .post(app.url("/openai/v1/videos"))
        .bearer_auth(&app.demo_key)
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let video: Value = response.json().await.unwrap();
    assert_eq!((video["seconds"].as_str(), video["size"].as_str()), (Some("8"), Some("720x1280")));
    let job = app.job(&app.demo_key, video["id"].as_str().unwrap(), 0).await;
    assert_eq!(job["credits_held"], 32, "8 s at 720p");
}

#[tokio::test]
async fn models_are_the_catalogs_in_openais_list() {
    let app = spawn_app().await;
    let models: Value = app.get("/openai/v1/models", &app.demo_key).await.json().await.unwrap();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    let native: Value = app.get("/api/v1/models", &app.demo_key).await.json().await.unwrap();
    let native_ids: Vec<&str> = native["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, native_ids);
    assert!(models["data"].as_array().unwrap().iter().all(|m| m["object"] == "model" && m["created"].is_i64()));
    assert_openai_error(app.get("/openai/v1/models", "gj_nope").await, 401, None).await;
}

/// Each call of OpenAI's clients that `docs/openai.md` lists as not answered gets the answer the
/// table names: 404 for a path not served, 400 naming the parameter otherwise. Nothing is charged.
#[tokio::test]
async fn the_calls_not_answered_are_refused_as_the_docs_table_says() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let post = async |path: &str, body: Value| app.post(path, &user.key, &body).await;
    let video = json!({"model": "seedance-2.0-fast", "prompt": "x", "seconds": "4"});
    let made: Value = post("/openai/v1/videos", video.clone()).await.json().await.unwrap();
    let id = made["id"].as_str().unwrap();
    for path in [
        "/openai/v1/images/variations".to_owned(),
        format!("/openai/v1/videos/{id}/remix"),
        "/openai/v1/videos/edits".to_owned(),
        "/openai/v1/videos/extensions".to_owned(),
        "/openai/v1/videos/characters".to_owned(),
    ] {
        let answer = post(&path, json!({"prompt": "x", "video": {"id": id}})).await;
        assert_eq!(assert_openai_error(answer, 404, None).await["type"], "not_found_error", "{path}");
    }
    let character = app.get("/openai/v1/videos/characters/char_1", &user.key).await;
    assert_openai_error(character, 404, None).await;
    let on_a_video = post(&format!("/openai/v1/videos/{id}"), json!({})).await;
    assert_openai_error(on_a_video, 405, None).await;

    let streamed = post("/openai/v1/images/generations", json!({"prompt": "x", "stream": true})).await;
    assert_openai_error(streamed, 400, Some("stream")).await;
    let mut referenced = video;
    referenced["input_reference"] = json!("file");
    assert_openai_error(post("/openai/v1/videos", referenced).await, 400, Some("input_reference")).await;
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    assert_eq!(jobs["data"].as_array().unwrap().len(), 1, "only the first video: {jobs}");
}
