//! `POST /api/v1/uploads` over real HTTP: an image kept in the output store, served back by a
//! signed link that expires after `GENJOBS_UPLOAD_TTL_SECS`, and usable among a job's
//! `image_inputs`.

use std::io::Cursor;
use std::time::Duration;

use genjobs::Config;
use genjobs_test_wait::eventually;
use genjobs_tests::{TestApp, fast_config};
use reqwest::Response;
use serde_json::{Value, json};

use crate::{spawn_app, spawn_app_with};

fn png() -> Vec<u8> {
    let mut bytes = Vec::new();
    image::RgbImage::from_pixel(6, 4, image::Rgb([30, 90, 200]))
        .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
        .unwrap();
    bytes
}

async fn upload(app: &TestApp, key: &str, body: Vec<u8>) -> Response {
    app.client.post(app.url("/api/v1/uploads")).bearer_auth(key).body(body).send().await.unwrap()
}

#[tokio::test]
async fn an_uploaded_image_is_served_by_its_link_and_taken_as_an_image_input() {
    let app = spawn_app().await;
    let image = png();
    let answer = upload(&app, &app.demo_key, image.clone()).await;
    assert_eq!(answer.status(), 201);
    let url = answer.json::<Value>().await.unwrap()["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with(&app.url("/api/v1/uploads/")) && url.contains(".png?expires="), "{url}");
    let expires: i64 = url.split("expires=").nth(1).unwrap().split('&').next().unwrap().parse().unwrap();
    let day_from_now = time::OffsetDateTime::now_utc().unix_timestamp() + 24 * 3600;
    assert!((day_from_now - 5..=day_from_now + 5).contains(&expires), "a day by default: {expires}");

    let served = app.client.get(&url).send().await.unwrap();
    assert_eq!(served.status(), 200);
    assert_eq!(served.headers()["content-type"], "image/png");
    assert_eq!(served.headers()["x-content-type-options"], "nosniff");
    assert_eq!(served.bytes().await.unwrap().to_vec(), image, "the same bytes, without a key");

    let receipt =
        app.submit("images", &app.demo_key, json!({"prompt": "make it red", "image_inputs": [url.clone()]})).await;
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");

    let tampered = url.replace(".png?", ".jpg?");
    assert_eq!(app.client.get(&tampered).send().await.unwrap().status(), 403);
    let later = url.replace(&format!("expires={expires}"), &format!("expires={}", expires + 1));
    assert_eq!(app.client.get(&later).send().await.unwrap().status(), 403);
}

#[tokio::test]
async fn uploads_are_refused_by_their_bytes_their_size_and_without_a_key() {
    let app = spawn_app().await;
    let text = upload(&app, &app.demo_key, b"<svg xmlns='http://www.w3.org/2000/svg'/>".to_vec()).await;
    assert_eq!(text.status(), 400);
    let mut large = png();
    large.resize(20 * 1024 * 1024 + 1, 0);
    let too_large = upload(&app, &app.demo_key, large).await;
    assert_eq!(too_large.status(), 413);
    let anonymous = app.client.post(app.url("/api/v1/uploads")).body(png()).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
}

#[tokio::test]
async fn an_upload_link_is_refused_once_it_has_expired() {
    let defaults = fast_config();
    let http = genjobs_http::HttpSettings { upload_url_ttl: Duration::from_secs(1), ..defaults.http.clone() };
    let app = spawn_app_with(Config { http, ..defaults }).await;
    let answer = upload(&app, &app.demo_key, png()).await;
    let url = answer.json::<Value>().await.unwrap()["url"].as_str().unwrap().to_owned();
    assert_eq!(app.client.get(&url).send().await.unwrap().status(), 200, "valid at first");
    let expired = eventually(Duration::from_secs(5), async || {
        app.client.get(&url).send().await.is_ok_and(|served| served.status() == 403)
    });
    assert!(expired.await, "the link still served its image 5 s after its 1 s lifetime");
}
