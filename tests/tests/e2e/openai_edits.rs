//! `POST /openai/v1/images/edits` over real HTTP: a form of images and fields, streamed and
//! bounded as it arrives; the images reach the provider as the model's image inputs.

use std::io::Cursor;

use base64::Engine;

use genjobs_tests::{TestApp, large_job_config};
use reqwest::{Body, Response};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{spawn_app, spawn_app_with};

const BOUNDARY: &str = "genjobs-edit-boundary";

/// A small PNG, as a client uploads one.
fn png() -> Vec<u8> {
    let mut bytes = Vec::new();
    image::RgbImage::from_pixel(8, 8, image::Rgb([200, 40, 40]))
        .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
        .unwrap();
    bytes
}

/// A PNG padded with zeros to `bytes`: still an image by its first bytes, as large as asked.
fn png_of(bytes: usize) -> Vec<u8> {
    let mut padded = png();
    padded.resize(bytes, 0);
    padded
}

/// One part of a form: a text field, or a file when `filename` is given.
enum Part<'a> {
    Text(&'a str, &'a str),
    File(&'a str, &'a str, Vec<u8>),
}

fn form(parts: &[Part<'_>]) -> Vec<u8> {
    form_within(BOUNDARY, parts)
}

fn form_within(boundary: &str, parts: &[Part<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for part in parts {
        match part {
            Part::Text(name, value) => body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                    .as_bytes(),
            ),
            Part::File(name, filename, bytes) => {
                body.extend_from_slice(
                    format!(
                        "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: image/png\r\n\r\n"
                    )
                    .as_bytes(),
                );
                body.extend_from_slice(bytes);
                body.extend_from_slice(b"\r\n");
            }
        }
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

fn edit_request(app: &TestApp, key: &str, boundary: &str, body: impl Into<Body>) -> reqwest::RequestBuilder {
    app.client
        .post(app.url("/openai/v1/images/edits"))
        .bearer_auth(key)
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(body)
}

async fn edit(app: &TestApp, key: &str, body: impl Into<Body>) -> Response {
    edit_request(app, key, BOUNDARY, body).send().await.unwrap()
}

async fn refused(response: Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status);
    let body: Value = response.json().await.unwrap();
    body["error"].clone()
}

#[tokio::test]
async fn an_edit_of_uploaded_images_answers_images_and_costs_what_generating_does() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let body = form(&[
        Part::File("image[]", "a.png", png()),
        Part::File("image[]", "b.png", png()),
        Part::Text("prompt", "make it blue"),
        Part::Text("model", "nano-banana"),
        Part::Text("n", "2"),
        Part::Text("size", "1024x1024"),
        Part::Text("response_format", "b64_json"),
    ]);
    let response = edit(&app, &user.key, body).await;
    assert_eq!(response.status(), 200);
    let images: Value = response.json().await.unwrap();
    assert_eq!(images["data"].as_array().unwrap().len(), 2, "{images}");
    assert!(images["data"][0]["b64_json"].as_str().is_some_and(|b| !b.is_empty()));
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    let job = &jobs["data"][0];
    assert_eq!((job["state"].as_str(), job["credits_actual"].as_u64()), (Some("succeeded"), Some(8)), "{job}");
}

/// `count` images of `bytes` each, as OpenAI's clients name several.
fn images(count: usize, bytes: usize) -> Vec<Part<'static>> {
    (0..count).map(|_| Part::File("image[]", "large.png", png_of(bytes))).collect()
}

async fn jobs_of(app: &TestApp, key: &str) -> Vec<Value> {
    let jobs: Value = app.get("/api/v1/jobs", key).await.json().await.unwrap();
    jobs["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn sixteen_images_of_19_mib_in_all_reach_fal_and_a_byte_past_20_mib_is_413() {
    let app = spawn_app_with(large_job_config()).await;
    let user = app.create_user(100, json!({})).await;
    // 16 files of 19/16 MiB: about 25 MiB of data: URIs in the JSON the provider is sent.
    let mut parts = vec![Part::Text("prompt", "merge them all"), Part::Text("model", "nano-banana")];
    parts.extend(images(16, (19 << 20) / 16));
    let answer = edit(&app, &user.key, form(&parts)).await;
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    let jobs = jobs_of(&app, &user.key).await;
    let job = &jobs[0];
    assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("fal")), "{job}");

    // 20 MiB and one byte over four files: refused as the last file arrives, and no job.
    let mut over = vec![Part::Text("prompt", "one byte too many")];
    over.extend(images(3, 5 << 20));
    over.push(Part::File("image[]", "last.png", png_of((5 << 20) + 1)));
    assert_eq!(refused(edit(&app, &user.key, form(&over)).await, 413).await["code"], "body_too_large");
    assert_eq!(jobs_of(&app, &user.key).await.len(), 1, "only the first edit made a job");
}

#[tokio::test]
async fn an_image_of_19_mib_reaches_replicate_as_a_data_uri() {
    let sim = super::replicate::replicate_sim();
    let app = spawn_app_with(super::replicate::replicate_only(&sim, false, large_job_config())).await;
    let user = app.create_user(100, json!({})).await;
    let image = png_of(19 << 20);
    let body = form(&[
        Part::File("image", "large.png", image.clone()),
        Part::Text("prompt", "in the same light"),
        Part::Text("model", "flux-pro"),
    ]);
    let answer = edit(&app, &user.key, body).await;
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    let job = &jobs_of(&app, &user.key).await[0];
    assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("replicate")), "{job}");
    let calls = sim.create_calls();
    let sent = calls[0].body["input"]["image_prompt"].as_str().unwrap();
    let data = sent.strip_prefix("data:image/png;base64,").unwrap();
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(data).unwrap(), image, "the same bytes");
}

#[tokio::test]
async fn an_idempotent_edit_retry_answers_the_same_images_whatever_the_forms_boundary() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let parts = |image: Vec<u8>| {
        vec![Part::Text("prompt", "make it blue"), Part::File("image[]", "a.png", image), Part::Text("n", "2")]
    };
    let send = |boundary: &'static str, image: Vec<u8>| {
        edit_request(&app, &user.key, boundary, form_within(boundary, &parts(image)))
            .header("idempotency-key", "same-edit")
            .send()
    };
    let first: Value = send("first-boundary", png()).await.unwrap().json().await.unwrap();
    let again = send("another-boundary", png()).await.unwrap();
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    let paths = |images: &Value| -> Vec<String> {
        let data = images["data"].as_array().unwrap();
        data.iter().map(|image| image["url"].as_str().unwrap().split('?').next().unwrap().to_owned()).collect()
    };
    assert_eq!(paths(&first).len(), 2, "{first}");
    assert_eq!(paths(&first), paths(&again), "the same job's images");
    assert_eq!(jobs_of(&app, &user.key).await.len(), 1, "one job");

    let other = send("first-boundary", png_of(png().len() + 1)).await.unwrap();
    assert_eq!(refused(other, 409).await["type"], "conflict_error", "another image under the same key");
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!((account["credits_spent"].as_u64(), account["credits_held"].as_u64()), (Some(8), Some(0)));
}

#[tokio::test]
async fn a_failed_edit_is_502_without_retry_and_a_refused_one_400() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let body = |prompt: &'static str| form(&[Part::File("image", "a.png", png()), Part::Text("prompt", prompt)]);
    let failed = edit(&app, &user.key, body("[sim:fail] no luck")).await;
    assert_eq!(failed.headers().get("x-should-retry").and_then(|v| v.to_str().ok()), Some("false"));
    assert_eq!(refused(failed, 502).await["code"], "upstream_failed");
    let rejected = edit(&app, &user.key, body("[sim:reject] not this")).await;
    assert!(rejected.headers().get("x-should-retry").is_none());
    assert_eq!(refused(rejected, 400).await["code"], "upstream_rejected");
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(100), Some(0)));
}

#[tokio::test]
async fn edits_are_refused_by_their_bytes_their_count_and_their_model() {
    let app = spawn_app().await;
    let not_image = form(&[
        Part::File("image", "cat.png", b"<svg xmlns='http://www.w3.org/2000/svg'/>".to_vec()),
        Part::Text("prompt", "x"),
    ]);
    assert_eq!(refused(edit(&app, &app.demo_key, not_image).await, 400).await["param"], "image");
    let many: Vec<Part<'_>> =
        (0..17).map(|_| Part::File("image[]", "a.png", png())).chain([Part::Text("prompt", "x")]).collect();
    assert_eq!(refused(edit(&app, &app.demo_key, form(&many)).await, 400).await["param"], "image");
    let none = form(&[Part::Text("prompt", "x")]);
    assert_eq!(refused(edit(&app, &app.demo_key, none).await, 400).await["param"], "image");
    let mask =
        form(&[Part::File("image", "a.png", png()), Part::File("mask", "m.png", png()), Part::Text("prompt", "x")]);
    assert_eq!(refused(edit(&app, &app.demo_key, mask).await, 400).await["param"], "mask");
    let streamed =
        form(&[Part::File("image", "a.png", png()), Part::Text("prompt", "x"), Part::Text("stream", "true")]);
    assert_eq!(refused(edit(&app, &app.demo_key, streamed).await, 400).await["param"], "stream");

    let minimal = json!({
        "modality": "image",
        "display_name": "No image inputs",
        "price": {"per": "image", "credits": 2},
        "routes": [{"provider": "fal", "endpoint": "fal-ai/nano-banana"}],
    });
    assert_eq!(app.put_model("text-only", &minimal).await.status(), 201);
    let text_only =
        form(&[Part::File("image", "a.png", png()), Part::Text("prompt", "x"), Part::Text("model", "text-only")]);
    assert_eq!(refused(edit(&app, &app.demo_key, text_only).await, 400).await["param"], "model");
    let json = app.post("/openai/v1/images/edits", &app.demo_key, &json!({"prompt": "x"})).await;
    assert_eq!(json.status(), 415);
    let jobs: Value = app.get("/api/v1/jobs", &app.demo_key).await.json().await.unwrap();
    assert!(jobs["data"].as_array().unwrap().is_empty(), "nothing was accepted: {jobs}");
}

/// The status line of the answer to a raw request of `head` then `chunks`, read while they are
/// still being written (a server that answers before the body has come is heard), and whether
/// every chunk had been written when it came.
async fn status_while_sending(app: &TestApp, head: String, chunks: Vec<Vec<u8>>) -> (String, bool) {
    let stream = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let sending = tokio::spawn(async move {
        writer.write_all(head.as_bytes()).await?;
        for chunk in chunks {
            writer.write_all(&chunk).await?;
        }
        writer.flush().await
    });
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    while !answer.windows(2).any(|w| w == b"\r\n") {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buffer[..n]),
        }
    }
    let sent_all = sending.is_finished() && sending.await.is_ok_and(|written| written.is_ok());
    (String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned(), sent_all)
}

fn request_head(app: &TestApp, length: &str) -> String {
    let host = app.base.trim_start_matches("http://");
    format!(
        "POST /openai/v1/images/edits HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n{length}\r\n",
        app.demo_key
    )
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_as_it_arrives() {
    let app = spawn_app().await;
    // Refused from its declared length, before any of it is read.
    let declared = request_head(&app, &format!("Content-Length: {}\r\n", 40u64 << 20));
    let (status, _) = status_while_sending(&app, declared, vec![]).await;
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large");

    // No declared length: one PNG of 64 MiB in 1 MiB chunks, refused once past 20 MiB while the
    // rest is still on its way, more than the sockets' buffers hold.
    let mut part = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"big.png\"\r\nContent-Type: image/png\r\n\r\n"
    )
    .into_bytes();
    part.extend_from_slice(&png());
    let chunked = |bytes: &[u8]| [format!("{:x}\r\n", bytes.len()).as_bytes(), bytes, b"\r\n"].concat();
    let chunks: Vec<Vec<u8>> =
        std::iter::once(chunked(&part)).chain(std::iter::repeat_n(chunked(&vec![0u8; 1 << 20]), 64)).collect();
    let streamed = request_head(&app, "Transfer-Encoding: chunked\r\n");
    let (status, sent_all) = status_while_sending(&app, streamed, chunks).await;
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large");
    assert!(!sent_all, "the answer came before the body was read whole");
}
