//! Outputs that never expire: copied into the output store before the job is shown succeeded,
//! served by signed links that need no API key, with their type, length, ETag and byte ranges.

use std::time::Duration;

use genjobs::Config;
use genjobs_test_wait::wait_until;
use genjobs_tests::{TestApp, assert_error, fast_config};
use serde_json::{Value, json};

use crate::{spawn_app, spawn_app_with};

async fn succeeded(app: &TestApp, endpoint: &str, body: Value) -> Value {
    let receipt = app.submit(endpoint, &app.demo_key, body).await;
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    job
}

async fn fetch(app: &TestApp, url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = app.client.get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn a_stored_image_is_served_by_its_link_without_a_key() {
    let app = spawn_app().await;
    let job = succeeded(&app, "images", json!({"prompt": "a red kite", "aspect_ratio": "16:9"})).await;
    let output = &job["outputs"][0];
    let (url, meta) = (output["url"].as_str().unwrap(), &output["meta"]);
    assert!(url.starts_with(&app.url(&format!("/api/v1/files/{}/0?expires=", job["id"].as_str().unwrap()))), "{url}");
    assert_eq!(meta["stored"], true);
    assert!(meta["upstream_url"].as_str().unwrap().starts_with(&app.sim_url), "{meta}");

    let response = fetch(&app, url, &[]).await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "image/png");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["content-security-policy"], "sandbox");
    assert!(headers.get("content-disposition").is_none(), "an expected image type is served inline");
    assert_eq!(headers["accept-ranges"], "bytes");
    assert_eq!(headers["content-length"].to_str().unwrap(), meta["size_bytes"].to_string());
    let etag = headers["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.len() == 66, "{etag}");
    let png = response.bytes().await.unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let (width, height) =
        (u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap()));
    assert_eq!((width, height), (1024, 576), "the provider's image, byte for byte");
    let upstream = app.client.get(meta["upstream_url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(png, upstream);

    let unchanged = fetch(&app, url, &[("if-none-match", &etag)]).await;
    assert_eq!(unchanged.status(), 304);
}

#[tokio::test]
async fn a_head_of_a_signed_link_answers_the_gets_headers_without_the_body() {
    let app = spawn_app().await;
    let job = succeeded(&app, "images", json!({"prompt": "a kite's headers"})).await;
    let output = &job["outputs"][0];
    let url = output["url"].as_str().unwrap();
    let get = fetch(&app, url, &[]).await;
    let head = app.client.head(url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    for name in ["content-type", "content-length", "etag", "accept-ranges", "content-security-policy"] {
        assert_eq!(head.headers().get(name), get.headers().get(name), "{name}");
    }
    assert_eq!(head.headers()["content-length"].to_str().unwrap(), output["meta"]["size_bytes"].to_string());
    assert!(head.bytes().await.unwrap().is_empty(), "no body");
    let part = app.client.head(url).header("range", "bytes=0-9").send().await.unwrap();
    assert_eq!((part.status().as_u16(), part.headers()["content-length"].to_str().unwrap()), (206, "10"));
}

#[tokio::test]
async fn a_stored_video_serves_byte_ranges() {
    let app = spawn_app().await;
    let job = succeeded(&app, "video", json!({"prompt": "waves"})).await;
    let url = job["outputs"][0]["url"].as_str().unwrap();
    let whole = fetch(&app, url, &[]).await;
    assert_eq!(whole.headers()["content-type"], "video/mp4");
    let whole = whole.bytes().await.unwrap();
    let size = whole.len();

    let first = fetch(&app, url, &[("range", "bytes=0-99")]).await;
    assert_eq!(first.status(), 206);
    assert_eq!(first.headers()["content-range"].to_str().unwrap(), format!("bytes 0-99/{size}"));
    assert_eq!(first.headers()["content-length"], "100");
    assert_eq!(first.bytes().await.unwrap(), whole.slice(0..100));

    let tail = fetch(&app, url, &[("range", "bytes=-10")]).await;
    assert_eq!(tail.status(), 206);
    assert_eq!(tail.bytes().await.unwrap(), whole.slice(size - 10..));

    let beyond = fetch(&app, url, &[("range", &format!("bytes={size}-"))]).await;
    assert_eq!(beyond.headers()["content-range"].to_str().unwrap(), format!("bytes */{size}"));
    assert_error(beyond, 416, "invalid_request", "RANGE_NOT_SATISFIABLE").await;
}

#[tokio::test]
async fn a_wrong_or_expired_signature_is_forbidden_and_each_read_mints_a_fresh_link() {
    let mut config = fast_config();
    config.http.output_url_ttl = Duration::from_secs(1);
    let app = spawn_app_with(config).await;
    let job = succeeded(&app, "images", json!({"prompt": "a kite"})).await;
    let url = job["outputs"][0]["url"].as_str().unwrap().to_owned();
    assert_eq!(fetch(&app, &url, &[]).await.status(), 200);

    let (base, query) = url.split_once('?').unwrap();
    let other_output = format!("{}/1?{query}", base.trim_end_matches("/0"));
    let forged = format!("{base}?{}", query.replace("sig=", "sig=00"));
    for wrong in [forged, other_output, base.to_owned()] {
        assert_error(fetch(&app, &wrong, &[]).await, 403, "forbidden", "INVALID_SIGNATURE").await;
    }

    let status = async || fetch(&app, &url, &[]).await.status();
    wait_until(Duration::from_secs(30), "the link's expiry", status, |status| *status == 403).await;
    assert_error(fetch(&app, &url, &[]).await, 403, "forbidden", "INVALID_SIGNATURE").await;
    let again = app.job(&app.demo_key, job["id"].as_str().unwrap(), 0).await;
    let fresh = again["outputs"][0]["url"].as_str().unwrap();
    assert_ne!(fresh, url, "a read mints a new link");
    assert_eq!(fetch(&app, fresh, &[]).await.status(), 200);
}

#[tokio::test]
async fn an_output_that_cannot_be_copied_keeps_the_providers_url() {
    let app = spawn_app().await;
    let job = succeeded(&app, "images", json!({"prompt": "gone [sim:file-missing]"})).await;
    let output = &job["outputs"][0];
    assert_eq!(output["meta"]["stored"], false, "{output}");
    assert_eq!(output["url"], output["meta"]["upstream_url"]);
    assert!(output["meta"].get("size_bytes").is_none());

    let small = Config { output_max_bytes: 1000, ..fast_config() };
    let app = spawn_app_with(small).await;
    let job = succeeded(&app, "images", json!({"prompt": "too big to keep"})).await;
    assert_eq!(job["outputs"][0]["meta"]["stored"], false, "over GENJOBS_OUTPUT_MAX_BYTES");
}

#[tokio::test]
async fn without_an_output_store_the_providers_url_is_given_as_it_is() {
    let app = spawn_app_with(Config { output_store: Some("none".into()), ..fast_config() }).await;
    let job = succeeded(&app, "images", json!({"prompt": "plain"})).await;
    let output = &job["outputs"][0];
    assert!(output["url"].as_str().unwrap().starts_with(&app.sim_url), "{output}");
    assert!(output["meta"].get("stored").is_none() && output["meta"].get("upstream_url").is_none());
}
