//! The `genjobs` binary itself: with no environment but a free port it prints what an operator
//! needs, serves, and stops gracefully on SIGTERM.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use genjobs_test_wait::{eventually, wait_until};

fn value_after(lines: &[String], prefix: &str) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in {lines:?}"))
        .trim()
        .to_owned()
}

/// `genjobs` serving on a free port of the embedded default with `vars` and nothing else of the
/// environment, and the lines it prints first, up to its upstream line.
fn serve(vars: &[(&str, &str)], stderr: Stdio) -> (std::process::Child, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .env_clear()
        .env("GENJOBS_BIND", "127.0.0.1:0")
        .env("GENJOBS_SIM_PORT", "0")
        .envs(vars.iter().copied())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines: Vec<String> = Vec::new();
    while !lines.last().is_some_and(|l| l.starts_with("upstream: ")) {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "genjobs exited early: {lines:?}");
        lines.push(line.trim_end().to_owned());
    }
    (child, lines)
}

#[tokio::test]
async fn prints_address_token_and_demo_key_then_stops_on_sigterm() {
    let (mut child, lines) = serve(&[], Stdio::null());
    let address = value_after(&lines, "genjobs listening on ");
    let admin = value_after(&lines, "admin token: ");
    let key = value_after(&lines, "demo user API key: ");
    assert!(address.starts_with("http://127.0.0.1:"));
    assert!(admin.len() >= 32);
    assert!(key.starts_with("gj_"));

    let status = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", &format!("Authorization: Bearer {key}")])
        .arg(format!("{address}/api/v1/account"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "200");

    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let exit = async || child.try_wait().unwrap();
    let status = wait_until(Duration::from_secs(30), "the exit after SIGTERM", exit, Option::is_some).await;
    assert!(status.is_some_and(|status| status.success()), "{status:?}");
}

/// Whether process `pid` has a handler of its own for SIGINT: `/proc`'s `SigCgt` is a mask of the
/// caught signals, signal `n` at bit `n - 1`.
fn catches_sigint(pid: u32) -> bool {
    const SIGINT: u32 = 2;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let caught = status.lines().find_map(|line| line.strip_prefix("SigCgt:")).unwrap();
    u64::from_str_radix(caught.trim(), 16).unwrap() & (1 << (SIGINT - 1)) != 0
}

fn genjobs(args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_genjobs")).args(args).env_clear().envs(vars.iter().copied()).output().unwrap()
}

#[test]
fn help_lists_every_setting_with_its_variable_and_default_and_exits_0() {
    let help = genjobs(&["--help"], &[]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8(help.stdout).unwrap();
    for variable in [
        "GENJOBS_BIND",
        "DATABASE_URL",
        "GENJOBS_ADMIN_TOKEN",
        "GENJOBS_UPSTREAM_URL",
        "GENJOBS_UPSTREAM_KEY",
        "GENJOBS_POLL_INTERVAL_MS",
        "GENJOBS_STREAM_MAX_SECS",
        "GENJOBS_JOB_TIMEOUT_SECS",
        "GENJOBS_MODELS",
        "GENJOBS_DEFAULT_RATE_LIMIT_PER_MINUTE",
        "GENJOBS_DEFAULT_MAX_CONCURRENT_JOBS",
        "GENJOBS_DEMO_CREDITS",
        "GENJOBS_LOG_FORMAT",
        "GENJOBS_UPLOAD_TTL_SECS",
        "GENJOBS_UPLOAD_BYTES_PER_DAY",
        "GENJOBS_BODY_READ_TIMEOUT_SECS",
        "GENJOBS_TRUST_FORWARDED",
        "GENJOBS_UNAUTHENTICATED_PER_MINUTE",
        "GENJOBS_FAL_USER_ID",
    ] {
        assert!(text.contains(&format!("[env: {variable}")), "{variable} missing from --help");
    }
    assert!(text.contains("[default: 127.0.0.1:8080]") && text.contains("[default: 2000]"), "{text}");
    let version = genjobs(&["--version"], &[]);
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(String::from_utf8(version.stdout).unwrap().trim(), format!("genjobs {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn usage_errors_exit_2_and_a_bad_variable_is_named_on_one_line() {
    let unknown = genjobs(&["--frobnicate"], &[]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("--frobnicate"));
    assert_eq!(genjobs(&["frobnicate"], &[]).status.code(), Some(2));

    let bad = genjobs(&[], &[("GENJOBS_STREAM_MAX_SECS", "soon")]);
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8(bad.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("GENJOBS_STREAM_MAX_SECS") && stderr.contains("\"soon\""), "{stderr}");
}

#[test]
fn config_prints_the_effective_settings_with_secrets_masked() {
    let output = genjobs(
        &["config", "--poll-interval-ms", "250"],
        &[
            ("GENJOBS_ADMIN_TOKEN", "gja_very_secret"),
            ("GENJOBS_UPSTREAM_KEY", "fal-secret"),
            ("DATABASE_URL", "postgres://app:hunter2@db/genjobs"),
            ("GENJOBS_UPSTREAM_URL", ""),
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    for secret in ["gja_very_secret", "fal-secret", "hunter2"] {
        assert!(!text.contains(secret), "{secret} shown: {text}");
    }
    for line in [
        "GENJOBS_ADMIN_TOKEN=****  # environment",
        "DATABASE_URL=postgres://app:****@db/genjobs  # environment",
        "GENJOBS_POLL_INTERVAL_MS=250  # flag",
        "GENJOBS_UPSTREAM_URL=(unset)  # default",
        "GENJOBS_STREAM_MAX_SECS=60  # default",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in {text}");
    }
}

#[test]
fn json_logs_are_one_object_per_line_with_request_user_and_job_ids() {
    let (child, lines) = serve(&[("GENJOBS_LOG_FORMAT", "json")], Stdio::piped());
    let address = value_after(&lines, "genjobs listening on ");
    let key = value_after(&lines, "demo user API key: ");
    let submitted = Command::new("curl")
        .args(["-s", "-H", &format!("Authorization: Bearer {key}"), "-H", "X-Request-Id: trace-me-42"])
        .args(["-H", "Content-Type: application/json", "-d", r#"{"prompt":"a log line"}"#])
        .arg(format!("{address}/api/v1/images/generations"))
        .output()
        .unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&submitted.stdout).unwrap();
    let job_id = receipt["job_id"].as_str().unwrap().to_owned();
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!stderr.contains('\u{1b}'), "no ANSI colours when not a terminal");
    let events: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let request = events
        .iter()
        .find(|e| e["request_id"] == "trace-me-42")
        .unwrap_or_else(|| panic!("no line with the request id: {stderr}"));
    assert_eq!(request["job_id"], job_id.as_str(), "{request}");
    assert!(request["user_id"].as_str().is_some_and(|id| !id.is_empty()), "{request}");
    assert_eq!(request["status"], 202);
    assert!(events.iter().any(|e| e["job_id"] == job_id.as_str() && e["message"] == "job accepted"), "{stderr}");
}

/// A fast genjobs on the embedded default, and its address and demo key.
fn fast_service(credits: &str) -> (std::process::Child, String, String) {
    let vars = [
        ("GENJOBS_SIM_QUEUE_MS", "20"),
        ("GENJOBS_SIM_RUN_MS", "400"),
        ("GENJOBS_POLL_INTERVAL_MS", "50"),
        ("GENJOBS_DEMO_CREDITS", credits),
    ];
    let (child, lines) = serve(&vars, Stdio::null());
    (child, value_after(&lines, "genjobs listening on "), value_after(&lines, "demo user API key: "))
}

/// `genjobs` as the API's client of `address` with `key`; its exit status, stdout and stderr.
fn client(address: &str, key: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .args(args)
        .env_clear()
        .env("GENJOBS_API_URL", address)
        .env("GENJOBS_API_KEY", key)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (output.status.code(), String::from_utf8(output.stdout).unwrap(), String::from_utf8(output.stderr).unwrap())
}

#[test]
fn the_cli_generates_downloads_and_prints_the_paths() {
    let (mut service, address, key) = fast_service("1000");
    let out = std::env::temp_dir().join(format!("genjobs-cli-{}", std::process::id()));
    let started = Instant::now();
    let (status, stdout, stderr) = client(
        &address,
        &key,
        &["image", "a lighthouse", "--model", "flux-pro", "--n", "2", "--out", out.to_str().unwrap()],
    );
    let took = started.elapsed();
    assert_eq!(status, Some(0), "{stderr}");
    let paths: Vec<&str> = stdout.lines().collect();
    assert_eq!(paths.len(), 2, "{stdout}");
    for path in &paths {
        assert_eq!(&std::fs::read(path).unwrap()[1..4], b"PNG", "{path}");
    }
    assert!(stderr.contains("credits held") && stderr.contains("succeeded"), "{stderr}");
    eprintln!("genjobs image with 2 outputs took {took:?}");

    let (status, stdout, _) = client(
        &address,
        &key,
        &["video", "waves", "--duration", "5", "--resolution", "720p", "--json", "--out", out.to_str().unwrap()],
    );
    assert_eq!(status, Some(0));
    let document: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(document["job"]["state"], "succeeded");
    let file = document["files"][0].as_str().unwrap();
    assert!(file.ends_with(".mp4") && std::fs::metadata(file).unwrap().len() > 1000, "{document}");
    let job_id = document["job"]["id"].as_str().unwrap().to_owned();

    let (status, stdout, _) = client(&address, &key, &["jobs", "list", "--json"]);
    assert_eq!(status, Some(0));
    let listed: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(listed["data"][0]["id"], job_id.as_str());
    let (status, stdout, _) = client(&address, &key, &["jobs", "get", &job_id]);
    assert!(status == Some(0) && stdout.contains("succeeded"), "{stdout}");
    let (status, stdout, _) = client(&address, &key, &["models", "--modality", "video"]);
    assert!(status == Some(0) && stdout.contains("seedance"), "{stdout}");
    let (status, stdout, _) = client(&address, &key, &["account"]);
    assert!(status == Some(0) && stdout.contains("credits available"), "{stdout}");

    let (status, _, stderr) = client(&address, &key, &["image", "broken [sim:fail]", "--out", out.to_str().unwrap()]);
    assert_eq!(status, Some(1), "a failed job: {stderr}");
    assert!(stderr.contains("UPSTREAM_FAILED"), "{stderr}");
    std::fs::remove_dir_all(&out).unwrap();
    service.kill().unwrap();
}

/// Submits an image job of `prompt` over HTTP; its id.
fn curl_submit(address: &str, key: &str, prompt: &str) -> String {
    let submitted = Command::new("curl")
        .args(["-s", "-H", &format!("Authorization: Bearer {key}"), "-H", "Content-Type: application/json"])
        .args(["-d", &serde_json::json!({ "prompt": prompt }).to_string()])
        .arg(format!("{address}/api/v1/images/generations"))
        .output()
        .unwrap();
    let receipt: serde_json::Value = serde_json::from_slice(&submitted.stdout).unwrap();
    receipt["job_id"].as_str().unwrap_or_else(|| panic!("no job id: {receipt}")).to_owned()
}

/// With one slot at the provider, held by a job that never ends, `jobs get` and `jobs list` show
/// each waiting job's place among the user's own waiting jobs, oldest first.
#[tokio::test]
async fn the_cli_shows_a_jobs_place_among_the_users_waiting_jobs() {
    let vars = [
        ("GENJOBS_SIM_QUEUE_MS", "20"),
        ("GENJOBS_POLL_INTERVAL_MS", "50"),
        ("GENJOBS_UPSTREAM_KEY", "cli-key-wxyz"),
        ("GENJOBS_UPSTREAM_MAX_IN_FLIGHT", "1"),
    ];
    let (mut service, lines) = serve(&vars, Stdio::null());
    let (address, key) = (value_after(&lines, "genjobs listening on "), value_after(&lines, "demo user API key: "));
    curl_submit(&address, &key, "holds the slot [sim:hang]");
    let first = curl_submit(&address, &key, "waits first");
    let second = curl_submit(&address, &key, "waits second");
    let get = async |id: &str| client(&address, &key, &["jobs", "get", id]).1;
    let shown = wait_until(
        Duration::from_secs(10),
        "the second job waiting",
        async || get(&second).await,
        |out| out.contains("waiting for capacity"),
    )
    .await;
    assert!(shown.contains("#2 among your waiting jobs"), "{shown}");
    assert!(get(&first).await.contains("waiting for capacity: #1 among your waiting jobs"));
    let (status, listed, stderr) = client(&address, &key, &["jobs", "list"]);
    assert_eq!(status, Some(0), "{stderr}");
    let line = |id: &str| listed.lines().find(|line| line.starts_with(id)).unwrap_or_default().to_owned();
    assert!(line(&first).ends_with("#1 among your waiting jobs"), "{listed}");
    assert!(line(&second).ends_with("#2 among your waiting jobs"), "{listed}");
    service.kill().unwrap();
}

/// A PNG of 2×2 pixels, as a user's file would be.
const TINY_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0xfd, 0xd4, 0x9a, 0x73, 0x00, 0x00, 0x00, 0x10, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x68, 0x50, 0x50, 0x00, 0x22, 0x06, 0x08, 0x05, 0x00, 0x16, 0x8e, 0x03, 0x01,
    0xc2, 0x64, 0xc5, 0x27, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

#[test]
fn the_cli_uploads_a_local_image_given_to_image() {
    let (mut service, address, key) = fast_service("1000");
    let dir = std::env::temp_dir().join(format!("genjobs-cli-image-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (picture, notes) = (dir.join("fox.png"), dir.join("notes.png"));
    std::fs::write(&picture, TINY_PNG).unwrap();
    std::fs::write(&notes, "not an image").unwrap();
    let out = dir.join("out");
    let edit =
        ["image", "make it blue", "--image", picture.to_str().unwrap(), "--json", "--out", out.to_str().unwrap()];
    let (status, stdout, stderr) = client(&address, &key, &edit);
    assert_eq!(status, Some(0), "{stderr}");
    let document: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(document["job"]["state"], "succeeded", "{document}");

    let missing = dir.join("missing.png");
    let (status, _, stderr) = client(&address, &key, &["image", "x", "--image", missing.to_str().unwrap()]);
    assert_eq!(status, Some(2), "an unreadable file is a usage error: {stderr}");
    assert!(stderr.contains("missing.png"), "{stderr}");
    let (status, _, stderr) = client(&address, &key, &["image", "x", "--image", notes.to_str().unwrap()]);
    assert_ne!(status, Some(0));
    assert!(stderr.contains("PNG, JPEG, WebP or GIF"), "refused by its bytes: {stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
    service.kill().unwrap();
}

#[tokio::test]
async fn the_cli_exits_3_when_refused_2_on_usage_and_130_when_interrupted() {
    let (mut service, address, key) = fast_service("4");
    let (status, _, stderr) = client(&address, &key, &["video", "waves", "--duration", "5"]);
    assert_eq!(status, Some(3), "{stderr}");
    assert!(stderr.contains("NOT_ENOUGH_CREDITS") && stderr.contains("ask an operator for credits"), "{stderr}");
    let (status, _, stderr) = client(&address, "gj_000000000000wrong", &["account"]);
    assert!(status == Some(3) && stderr.contains("GENJOBS_API_KEY"), "{stderr}");
    let (status, _, stderr) = client(&address, &key, &["jobs", "get", "nope"]);
    assert!(status == Some(3) && stderr.contains("JOB_NOT_FOUND"), "{stderr}");
    let (status, _, stderr) = client(&address, &key, &["image", "x", "--model", "nope"]);
    assert_eq!(status, Some(3), "a 400 is the service's refusal, not an unreachable service: {stderr}");
    assert!(stderr.contains("INVALID_REQUEST") && stderr.contains("names the setting"), "{stderr}");
    let (status, _, stderr) = client(&address, &key, &["video", "waves", "--duration", "999"]);
    assert_eq!(status, Some(3), "{stderr}");
    assert!(stderr.contains("`--duration` must be") && !stderr.contains("duration_sec"), "named as typed: {stderr}");
    let (status, _, _) = client(&address, &key, &["image"]);
    assert_eq!(status, Some(2), "no prompt is a usage error");
    let (status, _, _) = client(&address, &key, &["image", "x", "--n", "9"]);
    assert_eq!(status, Some(2));

    let mut follower = Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .args(["image", "endless [sim:hang]", "--out", "/tmp"])
        .env_clear()
        .env("GENJOBS_API_URL", &address)
        .env("GENJOBS_API_KEY", &key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt it once it follows the job, not while it may still be starting.
    let mut lines = BufReader::new(follower.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        stderr.push_str(&line);
        stderr.push('\n');
        if line.contains("accepted") {
            break;
        }
    }
    let follows = async || catches_sigint(follower.id());
    assert!(eventually(Duration::from_secs(30), follows).await, "the client never listened for SIGINT: {stderr}");
    Command::new("kill").args(["-INT", &follower.id().to_string()]).status().unwrap();
    for line in lines {
        stderr.push_str(&line.unwrap());
        stderr.push('\n');
    }
    let status = follower.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("goes on"), "{stderr}");
    service.kill().unwrap();
}

#[test]
fn a_configured_admin_token_is_never_printed_and_a_short_one_stops_the_start() {
    let token = "a-configured-admin-token-of-40-characters";
    let (mut child, lines) = serve(&[("GENJOBS_ADMIN_TOKEN", token)], Stdio::null());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(lines.iter().all(|l| !l.contains(token) && !l.starts_with("admin token")), "{lines:?}");

    let short = genjobs(&[], &[("GENJOBS_BIND", "127.0.0.1:0"), ("GENJOBS_ADMIN_TOKEN", "short-token-16ch")]);
    assert_eq!(short.status.code(), Some(2), "a bad value is a usage error");
    let stderr = String::from_utf8(short.stderr).unwrap();
    assert!(
        stderr
            .starts_with("genjobs: GENJOBS_ADMIN_TOKEN (--admin-token) is 16 characters long; it must be at least 32"),
        "{stderr}"
    );
    assert!(!stderr.contains("short-token-16ch"), "the token is not shown: {stderr}");
    assert!(String::from_utf8(short.stdout).unwrap().is_empty());
}

/// The configuration reference's tables (docs/configuration.md) are `--help`'s: the same headings
/// in the same order, each with the same variables in the same order.
#[test]
fn the_configuration_reference_follows_help() {
    let help = String::from_utf8(genjobs(&["--help"], &[]).stdout).unwrap();
    let mut from_help: Vec<(String, Vec<String>)> = Vec::new();
    for line in help.lines() {
        if let Some(heading) = line.strip_suffix(':').filter(|h| !h.starts_with(' ') && !h.is_empty()) {
            from_help.push((heading.to_owned(), Vec::new()));
        } else if let Some((_, rest)) = line.split_once("[env: ") {
            let variable = rest.split([']', '=']).next().unwrap().to_owned();
            from_help.last_mut().unwrap().1.push(variable);
        }
    }
    let from_help: Vec<_> = from_help.into_iter().filter(|(_, variables)| !variables.is_empty()).collect();
    let reference =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md")).unwrap();
    let tables = reference.split_once(genjobs::config_table::BEGIN).unwrap().1;
    let tables = tables.split_once(genjobs::config_table::END).unwrap().0;
    let mut from_reference: Vec<(String, Vec<String>)> = Vec::new();
    for line in tables.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            from_reference.push((heading.to_owned(), Vec::new()));
        } else if let Some(rest) = line.strip_prefix("| `") {
            from_reference.last_mut().unwrap().1.push(rest.split('`').next().unwrap().to_owned());
        }
    }
    let subcommands = from_reference.pop().unwrap();
    assert_eq!(subcommands.0, "Read by subcommands only");
    assert_eq!(from_reference, from_help, "run `cargo xtask config-table`");
    assert!(subcommands.1.contains(&"GENJOBS_API_KEY".to_owned()), "{subcommands:?}");
}

#[test]
fn one_shot_commands_speak_plainly() {
    let export = genjobs(&["models", "export"], &[]);
    assert_eq!(export.status.code(), Some(2), "no DATABASE_URL is a usage error");
    let stderr = String::from_utf8(export.stderr).unwrap();
    assert_eq!(stderr, "genjobs: `models export` works against DATABASE_URL, which is not set\n");

    let help = String::from_utf8(genjobs(&["users", "create", "--help"], &[]).stdout).unwrap();
    assert!(help.contains("--database-url") && help.contains("--credits"), "{help}");
    assert!(!help.contains("--poll-interval-ms") && help.lines().count() < 30, "{help}");
    assert!(help.contains("`genjobs serve --help` lists them"), "{help}");

    let image = String::from_utf8(genjobs(&["image", "--help"], &[]).stdout).unwrap();
    assert!(image.contains("--api-key") && !image.contains("optional in the type"), "{image}");
    let keyless = genjobs(&["account"], &[]);
    assert_eq!(keyless.status.code(), Some(2));
    let stderr = String::from_utf8(keyless.stderr).unwrap();
    assert!(
        stderr.starts_with("genjobs: this command needs GENJOBS_API_KEY (--api-key), which is not set."),
        "{stderr}"
    );
}

/// Moderation settings that do not parse stop the start with a usage error naming the setting,
/// and `sim` without the built-in simulator stops it naming `GENJOBS_MODERATION_URL`.
#[test]
fn bad_moderation_settings_stop_the_start_naming_the_setting() {
    for (variable, value) in [
        ("GENJOBS_MODERATION_URL", "ftp://moderation.example"),
        ("GENJOBS_MODERATION_URL", "not a url"),
        ("GENJOBS_MODERATION_FAIL_OPEN", "perhaps"),
        ("GENJOBS_MODERATION_RETRY_WINDOW_SECS", "a minute"),
        ("GENJOBS_MODERATION_TIMEOUT_SECS", "0"),
    ] {
        let bad = genjobs(&[], &[("GENJOBS_BIND", "127.0.0.1:0"), (variable, value)]);
        assert_eq!(bad.status.code(), Some(2), "{variable}={value}");
        let stderr = String::from_utf8(bad.stderr).unwrap();
        assert!(stderr.contains(variable), "{variable}={value}: {stderr}");
    }
    let no_sim = genjobs(
        &[],
        &[
            ("GENJOBS_BIND", "127.0.0.1:0"),
            ("GENJOBS_UPSTREAM_URL", "http://127.0.0.1:9"),
            ("GENJOBS_MODERATION_URL", "sim"),
        ],
    );
    assert_ne!(no_sim.status.code(), Some(0));
    let stderr = String::from_utf8(no_sim.stderr).unwrap();
    assert!(stderr.contains("GENJOBS_MODERATION_URL") && stderr.contains("simulator"), "{stderr}");
}

#[test]
fn the_cli_submits_a_batch_from_a_file_waits_for_it_and_writes_its_results() {
    let (mut service, address, key) = fast_service("1000");
    let file = std::env::temp_dir().join(format!("genjobs-batch-{}.jsonl", std::process::id()));
    let lines: Vec<String> = (0..3)
        .map(|i| format!(r#"{{"custom_id": "sku-{i}", "modality": "image", "body": {{"prompt": "chair {i}"}}}}"#))
        .collect();
    std::fs::write(&file, format!("{}\n\n", lines.join("\n"))).unwrap();
    let (status, stdout, stderr) = client(&address, &key, &["batch", "submit", file.to_str().unwrap(), "--wait"]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(stdout.contains("completed: 3 items, 3 succeeded"), "{stdout}");
    let id = stdout.split_whitespace().nth(1).unwrap().to_owned();
    let (status, results, stderr) = client(&address, &key, &["batch", "results", &id]);
    assert_eq!(status, Some(0), "{stderr}");
    let names: Vec<String> = results
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["custom_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["sku-0", "sku-1", "sku-2"], "{results}");

    std::fs::write(
        &file,
        "{\"custom_id\": \"a\", \"modality\": \"image\", \"body\": {\"prompt\": \"ok\"}}\nnot json\n",
    )
    .unwrap();
    let (status, _, stderr) = client(&address, &key, &["batch", "submit", file.to_str().unwrap()]);
    assert_eq!(status, Some(2), "a file that is not JSONL is a usage error: {stderr}");
    assert!(stderr.contains("line 2"), "{stderr}");
    std::fs::write(&file, "{\"custom_id\": \"a\", \"modality\": \"image\", \"body\": {}}\n").unwrap();
    let (status, _, stderr) = client(&address, &key, &["batch", "submit", file.to_str().unwrap()]);
    assert_eq!(status, Some(3), "a refused item is the service's refusal: {stderr}");
    assert!(stderr.contains("items[0].body.prompt"), "{stderr}");
    std::fs::remove_file(&file).unwrap();
    service.kill().unwrap();
}
