//! The operator's catalog over HTTP: a model put is listed, quoted and run at once; a price
//! change leaves accepted jobs as they were; a deleted model's jobs finish; a faulty document is
//! refused with the JSON path of its fault.

use genjobs_tests::{ADMIN_TOKEN, assert_error};
use serde_json::{Value, json};

use crate::spawn_app;

/// nano-banana's document under a new name and price.
async fn banana(app: &genjobs_tests::TestApp, name: &str, credits: u64) -> Value {
    let mut document = app.admin_model("nano-banana").await;
    document["display_name"] = json!(name);
    document["price"] = json!({"per": "image", "credits": credits});
    document
}

#[tokio::test]
async fn a_model_put_is_listed_quoted_and_runs_without_a_restart() {
    let app = spawn_app().await;
    let document = banana(&app, "Test banana", 3).await;
    let created = app.put_model("test-banana", &document).await;
    assert_eq!(created.status(), 201);
    let shown: Value = created.json().await.unwrap();
    assert_eq!((shown["id"].as_str(), shown["price"]["credits"].as_u64()), (Some("test-banana"), Some(3)));
    assert_eq!(app.admin_model("test-banana").await["display_name"], "Test banana");
    assert!(app.model_ids(&app.demo_key).await.contains(&"test-banana".to_owned()));

    let quote: Value = app
        .post(
            "/api/v1/images/generations/quote",
            &app.demo_key,
            &json!({"prompt": "a pear", "model": "test-banana", "n": 2}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(quote["credits"], 6, "{quote}");

    let receipt =
        app.submit("images", &app.demo_key, json!({"prompt": "a pear", "model": "test-banana", "n": 2})).await;
    assert_eq!(receipt["credits_held"], 6);
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!((job["state"].as_str(), job["credits_actual"].as_u64()), (Some("succeeded"), Some(6)), "{job}");
    let output = app.client.get(job["outputs"][0]["url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(output.status(), 200);
    assert!(!output.bytes().await.unwrap().is_empty());

    let replaced = app.put_model("test-banana", &banana(&app, "Test banana 2", 3).await).await;
    assert_eq!(replaced.status(), 200);
}

#[tokio::test]
async fn a_minimal_document_takes_the_mapping_its_endpoint_suggests() {
    let app = spawn_app().await;
    let document = json!({
        "modality": "image",
        "display_name": "Minimal",
        "price": {"per": "image", "credits": 2},
        "routes": [{"provider": "fal", "endpoint": "fal-ai/nano-banana"}],
    });
    assert_eq!(app.put_model("minimal", &document).await.status(), 201);
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "a lime", "model": "minimal", "n": 2})).await;
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!((job["state"].as_str(), job["credits_actual"].as_u64()), (Some("succeeded"), Some(4)), "{job}");
    assert_eq!(job["outputs"].as_array().unwrap().len(), 2, "n reached fal as num_images");
}

#[tokio::test]
async fn a_price_change_moves_neither_the_hold_nor_the_charge_of_an_accepted_job() {
    let app = spawn_app().await;
    assert_eq!(app.put_model("priced", &banana(&app, "Priced", 5).await).await.status(), 201);
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "a plum", "model": "priced"})).await;
    assert_eq!(app.put_model("priced", &banana(&app, "Priced", 50).await).await.status(), 200);
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!((job["credits_held"].as_u64(), job["credits_actual"].as_u64()), (Some(5), Some(5)), "{job}");
    let quote: Value = app
        .post("/api/v1/images/generations/quote", &app.demo_key, &json!({"prompt": "a plum", "model": "priced"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(quote["credits"], 50);
}

#[tokio::test]
async fn a_deleted_model_is_no_longer_offered_but_its_jobs_finish_and_stay_readable() {
    let app = spawn_app().await;
    assert_eq!(app.put_model("short-lived", &banana(&app, "Short-lived", 2).await).await.status(), 201);
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "a fig", "model": "short-lived"})).await;
    let deleted = app.client.delete(app.url("/api/admin/models/short-lived")).bearer_auth(ADMIN_TOKEN).send().await;
    assert_eq!(deleted.unwrap().status(), 204);
    assert!(!app.model_ids(&app.demo_key).await.contains(&"short-lived".to_owned()));
    assert!(app.admin_model("short-lived").await.is_null());
    let body = json!({"prompt": "x", "model": "short-lived"});
    let refused = app.post("/api/v1/images/generations", &app.demo_key, &body).await;
    let error = assert_error(refused, 400, "invalid_request", "INVALID_REQUEST").await;
    assert_eq!(error["param"], "model");

    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!((job["state"].as_str(), job["model"].as_str()), (Some("succeeded"), Some("short-lived")), "{job}");
    let again = app.client.delete(app.url("/api/admin/models/short-lived")).bearer_auth(ADMIN_TOKEN).send().await;
    assert_error(again.unwrap(), 404, "not_found", "MODEL_NOT_FOUND").await;
}

#[tokio::test]
async fn a_faulty_document_is_refused_with_the_json_path_of_its_fault() {
    let app = spawn_app().await;
    let base = app.admin_model("nano-banana").await;
    let video = app.admin_model("kling-2.1-master").await;
    // flux-pro's second route runs at Replicate, checked against that model's published schema.
    let flux = app.admin_model("flux-pro").await;
    assert_eq!(flux["routes"][1]["provider"], "replicate", "{flux}");
    let changed = |document: &Value, change: fn(&mut Value)| {
        let mut document = document.clone();
        change(&mut document);
        document
    };
    let cases: Vec<(Value, &str)> = vec![
        (changed(&flux, |d| d["routes"][1]["model"] = json!("black-forest-labs/flux-nope")), "routes[1].model"),
        (changed(&flux, |d| d["routes"][1]["params"]["seed"] = json!("random_seed")), "routes[1].params.seed"),
        (changed(&flux, |d| d["routes"][1]["fixed"]["output_format"] = json!("webp")), "routes[1].fixed.output_format"),
        (changed(&base, |d| d["routes"][0]["endpoint"] = json!("fal-ai/no-such-model")), "routes[0].endpoint"),
        (changed(&base, |d| d["routes"][0]["params"]["seed"] = json!("random_seed")), "routes[0].params.seed"),
        (changed(&base, |d| d["routes"][0]["provider"] = json!("nowhere")), "routes[0].provider"),
        (changed(&base, |d| d["price"] = json!({"per": "image"})), "price.credits"),
        (changed(&base, |d| d["price"]["credits"] = json!(-3)), "price.credits"),
        (changed(&video, |d| d["price"] = json!({"per": "image", "credits": 1})), "price.per"),
        (changed(&base, |d| d["routes"] = json!([])), "routes"),
        (changed(&base, |d| d["fields"][1]["default"] = json!("7:5")), "fields[1].default"),
    ];
    for (document, param) in cases {
        let error =
            assert_error(app.put_model("faulty", &document).await, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], param, "{error}");
    }
    assert!(app.admin_model("faulty").await.is_null(), "nothing was stored");
    let anonymous = app.client.put(app.url("/api/admin/models/faulty")).json(&base).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
}
