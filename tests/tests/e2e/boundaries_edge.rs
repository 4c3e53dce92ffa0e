//! The edge's own limits inside an account, seen from outside: the allowance of 401s that never
//! locks out credentials the replica knows to be valid, the shape of a multipart form, refused
//! webhook URLs that name the reason's class only, and `/docs` under the console's policy.

use std::time::Duration;

use genjobs::Config;
use genjobs_http::HttpSettings;
use genjobs_tests::{ADMIN_TOKEN, TestApp, assert_error, fast_config};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::spawn_app_with;

/// A test app whose edge has the settings `http` makes of the usual ones.
async fn app_with(http: impl FnOnce(HttpSettings) -> HttpSettings) -> TestApp {
    let config = fast_config();
    spawn_app_with(Config { http: http(config.http.clone()), ..config }).await
}

/// A test app whose client address may be answered 401 `allowance` times a minute.
async fn app_allowing(allowance: u32) -> TestApp {
    app_with(|http| HttpSettings { unauthenticated_per_minute: allowance, ..http }).await
}

async fn status(app: &TestApp, path: &str, token: &str) -> u16 {
    app.get(path, token).await.status().as_u16()
}

#[tokio::test]
async fn a_flood_of_bad_keys_leaves_valid_keys_and_the_admin_token_answered() {
    let app = app_allowing(5).await;
    let user = app.create_user(100, json!({})).await;
    let unused = app.create_user(100, json!({})).await;
    assert_eq!(status(&app, "/api/v1/account", &app.demo_key).await, 200);
    assert_eq!(status(&app, "/api/v1/account", &user.key).await, 200);

    let mut refusals = Vec::new();
    for i in 0..20 {
        refusals.push(status(&app, "/api/v1/account", &format!("gj_guess{i:02}{}", "0".repeat(25))).await);
        // The clients of good keys behind the same address go on throughout.
        assert_eq!(status(&app, "/api/v1/account", &app.demo_key).await, 200, "guess {i}");
    }
    assert_eq!(refusals[..5], [401; 5], "{refusals:?}");
    assert_eq!(refusals[5..], [429; 15], "past the allowance, without a look-up: {refusals:?}");

    assert_eq!(status(&app, "/api/v1/account", &user.key).await, 200);
    assert_eq!(status(&app, "/api/admin/users", ADMIN_TOKEN).await, 200, "the admin token keeps working");
    let limited = app.get("/api/admin/users", "not-the-admin-token").await;
    assert_error(limited, 429, "rate_limited", "RATE_LIMIT_EXCEEDED").await;
    // A live key this replica has never let in is, to it, one more guess.
    assert_eq!(status(&app, "/api/v1/account", &unused.key).await, 429);
}

/// Sends `key` until it is no longer let in: the first refusal after it changed.
async fn first_refusal(app: &TestApp, key: &str) -> u16 {
    let read = async || status(app, "/api/v1/account", key).await;
    genjobs_test_wait::wait_until(Duration::from_secs(5), "the key refused", read, |status| *status != 200).await
}

#[tokio::test]
async fn a_revoked_key_hammering_gets_401_then_429_while_a_live_key_goes_on() {
    let app = app_allowing(3).await;
    let user = app.create_user(100, json!({})).await;
    assert_eq!(status(&app, "/api/v1/account", &user.key).await, 200);
    assert_eq!(status(&app, "/api/v1/account", &app.demo_key).await, 200);
    let revoke = app.client.delete(app.url(&format!("/api/admin/keys/{}", &user.key[..15]))).bearer_auth(ADMIN_TOKEN);
    assert_eq!(revoke.send().await.unwrap().status(), 204);

    // Once known valid, it is looked up once more, refused and forgotten: then it is one more
    // wrong key, answered 401 within the allowance and 429 past it.
    let mut hammering = vec![first_refusal(&app, &user.key).await];
    for _ in 0..7 {
        hammering.push(status(&app, "/api/v1/account", &user.key).await);
        assert_eq!(status(&app, "/api/v1/account", &app.demo_key).await, 200);
    }
    assert_eq!(hammering, [401, 401, 401, 429, 429, 429, 429, 429]);
}

#[tokio::test]
async fn an_expired_key_is_refused_then_limited_like_any_other() {
    let app = app_allowing(2).await;
    let user = app.create_user(100, json!({})).await;
    assert_eq!(status(&app, "/api/v1/account", &user.key).await, 200);
    assert_eq!(status(&app, "/api/v1/account", &app.demo_key).await, 200);
    let expire = app
        .client
        .patch(app.url(&format!("/api/admin/keys/{}", &user.key[..15])))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"expires_at": "2020-01-01T00:00:00Z"}));
    assert_eq!(expire.send().await.unwrap().status(), 200);

    let mut hammering = vec![first_refusal(&app, &user.key).await];
    for _ in 0..3 {
        hammering.push(status(&app, "/api/v1/account", &user.key).await);
    }
    assert_eq!(hammering, [401, 401, 429, 429]);
    assert_eq!(status(&app, "/api/v1/account", &app.demo_key).await, 200);
}

const BOUNDARY: &str = "genjobs-edge-boundary";

fn text_part(name: &str, value: &str) -> String {
    format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
}

/// The headers of a part named `name`, with `extra` header lines, whose value is to follow.
fn part_head(name: &str, extra: &str) -> String {
    format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n{extra}\r\n")
}

fn chunk(bytes: &[u8]) -> Vec<u8> {
    [format!("{:x}\r\n", bytes.len()).as_bytes(), bytes, b"\r\n"].concat()
}

/// The status and JSON body of the answer to an edit whose chunked body is `start`, then
/// `filler` again and again, never ending: an answer at all is one given before the body was
/// read whole.
async fn answer_to_endless_form(app: &TestApp, start: &str, filler: &str) -> (u16, Value) {
    let host = app.base.trim_start_matches("http://");
    let head = format!(
        "POST /openai/v1/images/edits HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nTransfer-Encoding: chunked\r\n\r\n",
        app.demo_key
    );
    let (mut reader, mut writer) = TcpStream::connect(host).await.unwrap().into_split();
    // An empty chunk would end the body.
    let start = if start.is_empty() { Vec::new() } else { chunk(start.as_bytes()) };
    let filler = chunk(filler.as_bytes());
    let sending = tokio::spawn(async move {
        if writer.write_all(head.as_bytes()).await.is_ok() && writer.write_all(&start).await.is_ok() {
            while writer.write_all(&filler).await.is_ok() {}
        }
    });
    let answer = tokio::time::timeout(Duration::from_secs(30), async {
        let mut answer = Vec::new();
        let mut buffer = [0u8; 8192];
        loop {
            if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if answer.len() >= end + 4 + length {
                    let status = head[9..12].parse().unwrap();
                    break (status, serde_json::from_slice(&answer[end + 4..end + 4 + length]).unwrap());
                }
            }
            let read = reader.read(&mut buffer).await.unwrap();
            assert!(read > 0, "closed without an answer: {}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&buffer[..read]);
        }
    })
    .await
    .expect("answered while the body was still arriving");
    sending.abort();
    answer
}

fn assert_openai_error(answer: &(u16, Value), status: u16, code: &str, param: Option<&str>) {
    let (got, body) = answer;
    assert_eq!(*got, status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["param"].as_str(), param, "{body}");
}

#[tokio::test]
async fn a_form_past_64_parts_is_refused_at_the_65th() {
    let app = spawn_app_with(fast_config()).await;
    let mut parts: String = (0..64).map(|i| text_part("prompt", &format!("p{i}"))).collect();
    parts.push_str(&part_head("prompt", ""));
    let answer = answer_to_endless_form(&app, &parts, &"x".repeat(64 << 10)).await;
    assert_openai_error(&answer, 400, "invalid_request", Some("parts"));
    assert!(answer.1["error"]["message"].as_str().unwrap().contains("64 parts"), "{}", answer.1);
}

#[tokio::test]
async fn a_form_of_64_parts_is_taken_with_the_last_value_of_a_repeated_field() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(100, json!({})).await;
    let mut png = Vec::new();
    image::RgbImage::from_pixel(8, 8, image::Rgb([40, 200, 40]))
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&png);
    body.extend_from_slice(b"\r\n");
    body.extend_from_slice(text_part("model", "nano-banana").as_bytes());
    // With the image and the model, 64 parts: the most a form may have.
    for i in 0..62 {
        body.extend_from_slice(text_part("prompt", &format!("edge prompt {i}")).as_bytes());
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    let answer = app
        .client
        .post(app.url("/openai/v1/images/edits"))
        .bearer_auth(&user.key)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
    let prompts = app.sim_stats().await["submits_by_prompt"].clone();
    assert_eq!(prompts["edge prompt 61"], 1, "{prompts}");
    assert!(prompts.get("edge prompt 60").is_none(), "only the last value counts: {prompts}");
}

#[tokio::test]
async fn a_part_name_past_256_bytes_is_refused_before_its_value() {
    let app = spawn_app_with(fast_config()).await;
    let start = format!("{}{}", text_part("prompt", "x"), part_head(&"n".repeat(300), ""));
    let answer = answer_to_endless_form(&app, &start, &"x".repeat(64 << 10)).await;
    assert_openai_error(&answer, 400, "invalid_request", Some("parts[1].name"));
}

#[tokio::test]
async fn a_part_whose_headers_pass_8_kib_is_refused_before_its_value() {
    let app = spawn_app_with(fast_config()).await;
    let long = part_head("prompt", &format!("X-Padding: {}\r\n", "p".repeat(9 << 10)));
    let answer = answer_to_endless_form(&app, &long, &"x".repeat(64 << 10)).await;
    assert_openai_error(&answer, 400, "invalid_request", Some("parts[0].headers"));
    // Headers that never end are refused too, by the parser's own bound.
    let endless = format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"prompt\"\r\nX-Padding: ");
    let answer = answer_to_endless_form(&app, &endless, &"p".repeat(64 << 10)).await;
    assert_openai_error(&answer, 400, "invalid_request", Some("parts[0].headers"));
}

#[tokio::test]
async fn a_chunked_body_past_the_total_is_413_before_it_ends() {
    let app = spawn_app_with(fast_config()).await;
    // Lines before the first part, which the parser skips and no part's limit counts.
    let answer = answer_to_endless_form(&app, "", &"skipped preamble line\r\n".repeat(1 << 14)).await;
    assert_openai_error(&answer, 413, "body_too_large", None);
    assert_eq!(answer.1["error"]["type"], "invalid_request_error");
}

/// A form that stalls is answered as any body that stalls (408, and closed), not as a malformed
/// form.
#[tokio::test]
async fn a_stalled_form_is_answered_408() {
    let app = app_with(|http| HttpSettings { body_read_timeout: Duration::from_secs(1), ..http }).await;
    let host = app.base.trim_start_matches("http://");
    let head = format!(
        "POST /openai/v1/images/edits HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: 4096\r\n\r\n{}",
        app.demo_key,
        part_head("prompt", "")
    );
    let mut stream = TcpStream::connect(host).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "still open: {answer}");
    assert!(answer.starts_with("HTTP/1.1 408") && answer.contains("\"request_timeout\""), "{answer}");
}

#[tokio::test]
async fn a_refused_webhook_url_names_the_reasons_class_never_the_address() {
    let app = spawn_app_with(fast_config()).await;
    let refusal = async |url: &str| {
        let body = json!({"prompt": "x", "webhook_url": url});
        let response = app.post("/api/v1/images/generations", &app.demo_key, &body).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], "webhook_url", "{error}");
        error["message"].as_str().unwrap().to_owned()
    };
    let private = refusal("http://localhost:18590/hook").await;
    assert!(private.contains("resolves to a private or reserved address"), "{private}");
    assert!(!private.contains("127.0.0.1") && !private.contains("::1"), "{private}");
    let literal = refusal("http://10.20.30.40/hook").await;
    assert!(literal.contains("a private or reserved address") && !literal.contains("10.20.30.40"), "{literal}");
    let unknown = refusal("http://no-such-host.invalid/hook").await;
    assert!(unknown.contains("cannot be resolved"), "{unknown}");
}

/// A policy's directives with its page's own hashes left out: what every page of the service
/// shares.
fn shared_policy(policy: &str) -> Vec<String> {
    let directive =
        |d: &str| d.split_whitespace().filter(|word| !word.starts_with("'sha256-")).collect::<Vec<_>>().join(" ");
    policy.split(';').map(directive).collect()
}

#[tokio::test]
async fn the_docs_page_has_the_consoles_strict_policy() {
    let app = spawn_app_with(fast_config()).await;
    let policy_of = async |path: &str| {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["x-content-type-options"], "nosniff", "{path}");
        response.headers()["content-security-policy"].to_str().unwrap().to_owned()
    };
    let (docs, console) = (policy_of("/docs").await, policy_of("/console").await);
    assert!(docs.contains("frame-ancestors 'none'") && docs.contains("script-src 'self' 'sha256-"), "{docs}");
    assert_eq!(shared_policy(&docs), shared_policy(&console));
}
