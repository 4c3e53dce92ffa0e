//! `POST /openai/v1/images/edits` over real HTTP: a form of images and fields, streamed and
//! bounded as it arrives; the images are kept as uploads are, once per content, and reach the
//! provider as the model's image inputs by their links: no job holds their bytes.

use std::io::Cursor;
use std::time::Duration;

use genjobs::Config;
use genjobs_tests::{TestApp, large_job_config};
use reqwest::{Body, Response};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{spawn_app, spawn_app_with};

pub(crate) const BOUNDARY: &str = "genjobs-edit-boundary";

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
pub(crate) enum Part<'a> {
    Text(&'a str, &'a str),
    File(&'a str, &'a str, Vec<u8>),
}

pub(crate) fn form(parts: &[Part<'_>]) -> Vec<u8> {
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

/// An edit of `image` alone by `key`.
pub(crate) async fn edit_of(app: &TestApp, key: &str, image: Vec<u8>) -> Response {
    edit(app, key, form(&[Part::File("image", "a.png", image), Part::Text("prompt", "in the same light")])).await
}

async fn refused(response: Response, status: u16) -> Value {
    let actual = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(actual, status, "{body}");
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
    // 16 files of 19/16 MiB, each kept as an upload: the job and the provider get 16 links.
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
async fn an_image_of_19_mib_reaches_replicate_as_a_link_to_its_bytes() {
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
    assert!(sent.starts_with(&app.url("/api/v1/uploads/")), "a link of this service: {sent}");
    let fetched = app.client.get(sent).send().await.unwrap();
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.bytes().await.unwrap().to_vec(), image, "the same bytes, without a key");
}

/// A PNG of `bytes` whose body is noise: bytes no store compresses, as a photo's are.
fn noisy_png_of(bytes: usize) -> Vec<u8> {
    let mut image = png();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    while image.len() < bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        image.extend_from_slice(&state.to_le_bytes());
    }
    image.truncate(bytes);
    image
}

const COPY: i64 = 4 << 20;
const JOB_ROW_LIMIT: usize = 64 << 10;

/// Five edits of one 4 MiB image on `config`: the image is kept once (on Postgres: the database
/// grows by less than `growth_limit`, and by less than a copy after the first edit), and no job
/// holds its bytes: the listing and each job's detail are small and carry no `data:` URI, and
/// every job names the image by the same link.
async fn five_edits_of_one_image(config: Config, growth_limit: i64) {
    let app = spawn_app_with(config).await;
    let user = app.create_user(1000, json!({})).await;
    let image = noisy_png_of(COPY as usize);
    let size = async || match &app.database {
        Some(db) => db.number("SELECT pg_database_size(current_database()) AS n").await,
        None => 0,
    };
    let before = size().await;
    let mut after_first = 0;
    for i in 0..5 {
        let answer = edit_of(&app, &user.key, image.clone()).await;
        assert_eq!(answer.status(), 200, "edit {i}: {}", answer.text().await.unwrap());
        if i == 0 {
            after_first = size().await;
        }
    }
    let after = size().await;
    if let Some(db) = &app.database {
        let largest_row = db.number("SELECT max(pg_column_size(j.*))::int8 AS n FROM jobs j").await;
        let kept = db.number("SELECT count(*) AS n FROM uploads").await;
        println!(
            "five edits of a {COPY}-byte image: the database grew {} bytes ({} after the first edit), the largest job row is {largest_row} bytes, {kept} upload row(s)",
            after - before,
            after - after_first,
        );
        assert!(after - before < growth_limit, "grew {} bytes", after - before);
        assert!(after - after_first < COPY, "the four edits after the first grew it {} bytes", after - after_first);
        assert!(largest_row < JOB_ROW_LIMIT as i64, "a job row of {largest_row} bytes");
        assert_eq!(kept, 1, "one content");
    }
    let listing = app.get("/api/v1/jobs", &user.key).await.text().await.unwrap();
    assert!(listing.len() < JOB_ROW_LIMIT && !listing.contains("data:"), "{} bytes", listing.len());
    let jobs = jobs_of(&app, &user.key).await;
    assert_eq!(jobs.len(), 5);
    for job in jobs {
        let id = job["id"].as_str().unwrap();
        let detail = app.get(&format!("/api/admin/jobs/{id}"), genjobs_tests::ADMIN_TOKEN).await.text().await.unwrap();
        assert!(detail.len() < JOB_ROW_LIMIT && !detail.contains("data:"), "{} bytes", detail.len());
    }
}

#[tokio::test]
async fn five_edits_of_one_image_keep_it_once_in_the_output_store_and_jobs_only_link_it() {
    five_edits_of_one_image(large_job_config(), COPY).await;
}

#[tokio::test]
async fn five_edits_of_one_image_keep_it_once_apart_from_the_jobs_without_an_output_store() {
    let config = Config { output_store: Some("none".into()), ..large_job_config() };
    five_edits_of_one_image(config, 2 * COPY).await;
}

/// An edit's image is kept as an upload is, under its content, served by a signed link.
#[tokio::test]
async fn an_edits_image_is_kept_as_an_upload_is() {
    let app = spawn_app_with(super::uploads::upload_config(Duration::from_secs(3600), 1 << 30)).await;
    let image = png_of(1000);
    assert_eq!(edit_of(&app, &app.demo_key, image.clone()).await.status(), 200);
    let kept = app.client.get(super::uploads::lasting_link(&app, &image)).send().await.unwrap();
    assert_eq!(kept.status(), 200);
    assert_eq!(kept.bytes().await.unwrap().to_vec(), image);
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
    // `provider` arrives as JSON text in a form.
    for (provider, param) in
        [(r#"{"only": ["replicate"]}"#, "provider"), (r#"{"order": ["nobody"]}"#, "provider.order[0]")]
    {
        let routed =
            form(&[Part::File("image", "a.png", png()), Part::Text("prompt", "x"), Part::Text("provider", provider)]);
        assert_eq!(refused(edit(&app, &app.demo_key, routed).await, 400).await["param"], param, "{provider}");
    }

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
