//! `POST /api/v1/uploads` over real HTTP: an image kept once per content, served back by a
//! signed link that expires after `GENJOBS_UPLOAD_TTL_SECS`, usable among a job's
//! `image_inputs`, counted against `GENJOBS_UPLOAD_BYTES_PER_DAY`, and deleted once its time is
//! over unless a job not yet final needs it.
//!
//! Whether an upload is still kept after its link expired is read through a link the test signs
//! itself, with the service's `GENJOBS_LINK_SECRET` and a far expiry: 200 while kept, 404 once
//! deleted, on either store.

use std::io::Cursor;
use std::time::Duration;

use genjobs::Config;
use genjobs_domain::upload::UploadSettings;
use genjobs_domain::usecases::Settings;
use genjobs_test_wait::eventually;
use genjobs_tests::{TestApp, assert_error, fast_config};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use reqwest::Response;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{spawn_app, spawn_app_with};

const LINK_SECRET: &str = "the uploads tests' link secret, 32 characters or more";

fn png() -> Vec<u8> {
    png_of([30, 90, 200])
}

/// A small PNG of one colour: another colour, other bytes.
fn png_of(colour: [u8; 3]) -> Vec<u8> {
    let mut bytes = Vec::new();
    image::RgbImage::from_pixel(6, 4, image::Rgb(colour))
        .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
        .unwrap();
    bytes
}

/// [`fast_config`] with uploads kept `ttl` and `bytes_per_day` a user's daily quota, and links
/// signed under [`LINK_SECRET`].
pub(crate) fn upload_config(ttl: Duration, bytes_per_day: u64) -> Config {
    let defaults = fast_config();
    Config {
        gateway: Settings { uploads: UploadSettings { ttl, bytes_per_day }, ..defaults.gateway.clone() },
        link_secret: Some(LINK_SECRET.to_owned()),
        ..defaults
    }
}

/// A link to the upload of `bytes` (a PNG), signed as the service signs them under
/// [`LINK_SECRET`] (HKDF-SHA256 of the secret, then HMAC-SHA256), valid for an hour.
pub(crate) fn lasting_link(app: &TestApp, bytes: &[u8]) -> String {
    type HmacSha256 = Hmac<Sha256>;
    let prk = <HmacSha256 as KeyInit>::new_from_slice(b"genjobs output links").unwrap().chain_update(LINK_SECRET);
    let prk = prk.finalize().into_bytes();
    let key = <HmacSha256 as KeyInit>::new_from_slice(&prk).unwrap().chain_update(b"hmac-sha256 signing key\x01");
    let key = key.finalize().into_bytes();
    let name = format!("{}.png", hex::encode(Sha256::digest(bytes)));
    let expires = time::OffsetDateTime::now_utc().unix_timestamp() + 3600;
    let sig = <HmacSha256 as KeyInit>::new_from_slice(&key).unwrap().chain_update(format!("uploads/{name}/{expires}"));
    let sig = hex::encode(sig.finalize().into_bytes());
    app.url(&format!("/api/v1/uploads/{name}?expires={expires}&sig={sig}"))
}

/// The status a link answers.
async fn status_of(app: &TestApp, url: &str) -> u16 {
    app.client.get(url).send().await.unwrap().status().as_u16()
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

async fn url_of(response: Response) -> String {
    assert_eq!(response.status(), 201);
    response.json::<Value>().await.unwrap()["url"].as_str().unwrap().to_owned()
}

/// The part of a link that names its upload.
fn path_of(url: &str) -> &str {
    url.split('?').next().unwrap()
}

/// An upload and its link live `GENJOBS_UPLOAD_TTL_SECS`; then the link is refused and the
/// upload deleted, but not one a job not yet final names, which goes once the job is final.
#[tokio::test]
async fn an_expired_upload_is_deleted_unless_a_job_not_yet_final_needs_it() {
    let app = spawn_app_with(upload_config(Duration::from_secs(2), 1 << 30)).await;
    let (needed, unneeded) = (png_of([1, 2, 3]), png_of([4, 5, 6]));
    let needed_url = url_of(upload(&app, &app.demo_key, needed.clone()).await).await;
    let unneeded_url = url_of(upload(&app, &app.demo_key, unneeded.clone()).await).await;
    assert_eq!(status_of(&app, &unneeded_url).await, 200, "valid at first");
    let body = json!({"prompt": "hold on [sim:hang]", "image_inputs": [needed_url.clone()]});
    let job_id = app.submit("images", &app.demo_key, body).await["job_id"].as_str().unwrap().to_owned();

    let expired = eventually(Duration::from_secs(10), async || status_of(&app, &unneeded_url).await == 403);
    assert!(expired.await, "the link still served its image 10 s after its 2 s lifetime");
    let (needed_link, unneeded_link) = (lasting_link(&app, &needed), lasting_link(&app, &unneeded));
    let deleted = eventually(Duration::from_secs(10), async || status_of(&app, &unneeded_link).await == 404);
    assert!(deleted.await, "the unneeded upload was still kept 10 s after its time");
    // The sweep that deleted the one saw the other, made before it, expired too.
    assert_eq!(status_of(&app, &needed_link).await, 200, "kept while its job is not final");
    assert_eq!(status_of(&app, &needed_url).await, 403, "though its own link has expired");

    let canceled = app.post(&format!("/api/v1/jobs/{job_id}/cancel"), &app.demo_key, &json!({})).await;
    assert_eq!(canceled.status(), 200);
    let deleted = eventually(Duration::from_secs(10), async || status_of(&app, &needed_link).await == 404);
    assert!(deleted.await, "the upload was still kept 10 s after its job ended");
}

/// The same bytes uploaded again are the same upload: one name, one copy.
#[tokio::test]
async fn the_same_image_uploaded_twice_is_kept_once_under_one_name() {
    let app = spawn_app().await;
    let user = app.create_user(10, json!({})).await;
    let first = url_of(upload(&app, &app.demo_key, png()).await).await;
    let again = url_of(upload(&app, &user.key, png()).await).await;
    assert_eq!(path_of(&first), path_of(&again), "named by its content, whoever uploads it");
    let name = format!("{}.png", hex::encode(Sha256::digest(png())));
    assert!(path_of(&first).ends_with(&name), "{first}");
    assert_eq!(app.client.get(&again).send().await.unwrap().bytes().await.unwrap().to_vec(), png());
}

/// Past `GENJOBS_UPLOAD_BYTES_PER_DAY`, an upload is 429 `UPLOAD_QUOTA_EXCEEDED` and nothing of
/// it is kept; the same bytes again count again; other users have their own quota; an edit's
/// images count too.
#[tokio::test]
async fn uploads_past_the_days_quota_are_refused_and_keep_nothing() {
    let size = png().len() as u64;
    let app = spawn_app_with(upload_config(Duration::from_secs(3600), 2 * size + size / 2)).await;
    let (user, other) = (app.create_user(10, json!({})).await, app.create_user(10, json!({})).await);
    url_of(upload(&app, &user.key, png_of([7, 7, 7])).await).await;
    url_of(upload(&app, &user.key, png_of([7, 7, 7])).await).await;
    let refused = upload(&app, &user.key, png_of([8, 8, 8])).await;
    let retry_after: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&retry_after), "until midnight UTC: {retry_after}");
    let error = assert_error(refused, 429, "rate_limited", "UPLOAD_QUOTA_EXCEEDED").await;
    assert!(error["message"].as_str().unwrap().contains("quota"), "{error}");
    assert_eq!(status_of(&app, &lasting_link(&app, &png_of([8, 8, 8]))).await, 404, "nothing kept");
    url_of(upload(&app, &other.key, png_of([9, 9, 9])).await).await;

    let edit = super::openai_edits::edit_of(&app, &user.key, png_of([8, 8, 8])).await;
    assert_eq!(edit.status(), 429);
    let body: Value = edit.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upload_quota_exceeded", "{body}");
    assert_eq!(status_of(&app, &lasting_link(&app, &png_of([8, 8, 8]))).await, 404, "nothing kept");
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    assert!(jobs["data"].as_array().unwrap().is_empty(), "no job: {jobs}");
}
