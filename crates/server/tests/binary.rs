//! The `genjobs` binary itself: with no environment but a free port it prints what an operator
//! needs, serves, and stops gracefully on SIGTERM.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn value_after(lines: &[String], prefix: &str) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in {lines:?}"))
        .trim()
        .to_owned()
}

#[test]
fn prints_address_token_and_demo_key_then_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GENJOBS_BIND", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    while lines.len() < 4 {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "genjobs exited early: {lines:?}");
        lines.push(line.trim_end().to_owned());
    }
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
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}
