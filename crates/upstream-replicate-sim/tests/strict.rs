//! The simulator refuses what Replicate refuses, answered as Replicate answers: problem details,
//! `invalid_fields` on a 422.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use genjobs_upstream_replicate_sim::{RunningSim, SimConfig};
use serde_json::{Value, json};

const ULTRA: &str = "models/black-forest-labs/flux-1.1-pro-ultra/predictions";

async fn post(sim: &RunningSim, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(format!("{}/{path}", sim.api_url())).json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = request.send().await.unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap_or(Value::Null))
}

fn sim() -> RunningSim {
    genjobs_upstream_replicate_sim::spawn(SimConfig::default()).unwrap()
}

#[tokio::test]
async fn calls_without_the_token_are_unauthenticated() {
    let sim = sim();
    let body = json!({"input": {"prompt": "a fox"}});
    for token in [None, Some("wrong")] {
        let (status, problem) = post(&sim, ULTRA, token, &body).await;
        assert_eq!((status, problem["status"].as_u64()), (401, Some(401)));
    }
    let get = reqwest::get(format!("{}/predictions/x", sim.api_url())).await.unwrap();
    assert_eq!(get.status(), 401);
    assert_eq!(sim.predictions_created(), 0);
}

#[tokio::test]
async fn unknown_models_and_predictions_are_not_found() {
    let sim = sim();
    let (status, problem) =
        post(&sim, "models/someone/unknown/predictions", Some("sim-token"), &json!({"input": {"prompt": "x"}})).await;
    assert_eq!((status, problem["title"].as_str()), (404, Some("Not found")));
    let (status, _) = post(&sim, "predictions/nosuch/cancel", Some("sim-token"), &json!({})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn inputs_outside_the_schema_are_unprocessable_with_every_invalid_field() {
    let sim = sim();
    let body = json!({"input": {"prompt": "a fox", "aspect_ratio": "2:1", "num_outputs": 2, "seed": "7"}});
    let (status, problem) = post(&sim, ULTRA, Some("sim-token"), &body).await;
    assert_eq!(status, 422);
    let fields: Vec<(&str, &str)> = problem["invalid_fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["type"].as_str().unwrap(), f["field"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fields,
        [("enum", "input.aspect_ratio"), ("additional_property_not_allowed", "input"), ("invalid_type", "input.seed")]
    );
    assert!(problem["detail"].as_str().unwrap().contains("Additional property num_outputs is not allowed"));
    for body in [
        json!({"prompt": "no input object"}),
        json!({"input": {}}),
        json!({"input": {"prompt": "x"}, "webhook": "ftp://x"}),
    ] {
        let (status, problem) = post(&sim, ULTRA, Some("sim-token"), &body).await;
        assert_eq!((status, problem["invalid_fields"].is_array()), (422, true), "{body}");
    }
    assert_eq!(sim.predictions_created(), 0);
}

#[tokio::test]
async fn a_created_prediction_starts_and_has_no_file_before_it_succeeds() {
    let sim = sim();
    let (status, prediction) = post(&sim, ULTRA, Some("sim-token"), &json!({"input": {"prompt": "a fox"}})).await;
    assert_eq!((status, prediction["status"].as_str(), prediction["output"].is_null()), (201, Some("starting"), true));
    assert_eq!(prediction["model"], "black-forest-labs/flux-1.1-pro-ultra");
    let id = prediction["id"].as_str().unwrap();
    assert_eq!(prediction["urls"]["get"], format!("{}/predictions/{id}", sim.api_url()));
    let file = reqwest::get(format!("{}/files/{id}/output.jpg", sim.base_url)).await.unwrap();
    assert_eq!(file.status(), 404, "jpg is the model's default format, and nothing is served before success");
}

#[tokio::test]
async fn a_webhook_not_answered_2xx_is_delivered_again_with_the_same_id() {
    use std::sync::{Arc, Mutex};

    use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};

    let ids = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&ids);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = HttpServer::new(move || {
        let seen = Arc::clone(&seen);
        App::new().default_service(web::to(move |req: HttpRequest| {
            let id = req.headers().get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            let mut seen = seen.lock().unwrap();
            seen.push(id);
            let first = seen.len() == 1;
            async move {
                if first { HttpResponse::InternalServerError().finish() } else { HttpResponse::NoContent().finish() }
            }
        }))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    let sim = genjobs_upstream_replicate_sim::spawn(SimConfig {
        starting: std::time::Duration::ZERO,
        processing: std::time::Duration::from_millis(20),
        webhook_retry: std::time::Duration::from_millis(50),
        ..SimConfig::default()
    })
    .unwrap();
    let body = json!({"input": {"prompt": "a fox"}, "webhook": url, "webhook_events_filter": ["completed"]});
    assert_eq!(post(&sim, ULTRA, Some("sim-token"), &body).await.0, 201);
    let delivered = genjobs_test_wait::wait_until(
        std::time::Duration::from_secs(5),
        "a second delivery",
        async || ids.lock().unwrap().clone(),
        |ids| ids.len() >= 2,
    )
    .await;
    assert!(delivered[0].starts_with("msg_") && delivered[0] == delivered[1], "{delivered:?}");
}
