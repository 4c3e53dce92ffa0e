#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::sync::{Arc, Mutex};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};

use super::*;

/// What the service was sent: each call's `Authorization` and body.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// A moderation API on a free port that keeps what it was sent and answers `status` with `body`.
async fn service(status: u16, body: Value) -> (Url, Seen) {
    let seen: Seen = Arc::default();
    let kept = Arc::clone(&seen);
    let server = HttpServer::new(move || {
        let kept = Arc::clone(&kept);
        let body = body.clone();
        App::new().route(
            "/v1/moderations",
            web::post().to(move |request: HttpRequest, sent: web::Json<Value>| {
                let auth = request.headers().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
                kept.lock().unwrap().push((auth, sent.into_inner()));
                let body = body.clone();
                async move { HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap()).json(body) }
            }),
        )
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let port = server.addrs()[0].port();
    tokio::spawn(server.run());
    (Url::parse(&format!("http://127.0.0.1:{port}/v1/")).unwrap(), seen)
}

fn content() -> ModerationContent {
    ModerationContent { text: "a fox".into(), images: vec!["https://example.com/in.png".into()] }
}

fn client(url: &Url) -> OpenAiModeration {
    OpenAiModeration::new(url, Some("mod-key".into()), "omni-moderation-latest".into(), Duration::from_secs(5)).unwrap()
}

#[actix_web::test]
async fn sends_the_prompt_and_images_as_openai_asks_and_reads_a_pass() {
    let (url, seen) = service(
        200,
        json!({"id": "modr-1", "model": "omni-moderation-latest",
        "results": [{"flagged": false, "categories": {"violence": false}, "category_scores": {"violence": 0.01}}]}),
    )
    .await;
    let answer = client(&url).check(JobId::new_at(time::OffsetDateTime::now_utc()), &content()).await;
    assert_eq!(answer, Ok(ModerationAnswer::Passed));
    let (auth, body) = seen.lock().unwrap()[0].clone();
    assert_eq!(auth.as_deref(), Some("Bearer mod-key"));
    assert_eq!(
        body,
        json!({"model": "omni-moderation-latest", "input": [
            {"type": "text", "text": "a fox"},
            {"type": "image_url", "image_url": {"url": "https://example.com/in.png"}},
        ]})
    );
}

#[actix_web::test]
async fn a_flag_names_every_flagged_category_of_every_result() {
    let (url, _) = service(
        200,
        json!({"id": "modr-2", "model": "m", "results": [
            {"flagged": true, "categories": {"violence": true, "sexual": false}, "category_scores": {}},
            {"flagged": false, "categories": {"harassment/threatening": true}, "category_scores": {}},
        ]}),
    )
    .await;
    let answer = client(&url).check(JobId::new_at(time::OffsetDateTime::now_utc()), &content()).await;
    assert_eq!(
        answer,
        Ok(ModerationAnswer::Flagged { categories: vec!["harassment/threatening".into(), "violence".into()] })
    );
}

#[actix_web::test]
async fn errors_unreadable_answers_and_silence_are_unavailable() {
    let id = JobId::new_at(time::OffsetDateTime::now_utc());
    let (failing, _) = service(503, json!({"error": {"message": "overloaded"}})).await;
    assert!(client(&failing).check(id, &content()).await.is_err());
    let (odd, _) = service(200, json!({"results": []})).await;
    assert!(client(&odd).check(id, &content()).await.is_err());
    let closed = Url::parse("http://127.0.0.1:9/").unwrap();
    let error = client(&closed).check(id, &content()).await.unwrap_err();
    assert!(!error.to_string().contains("mod-key"), "{error}");
}
