//! The service's own pages in a real browser: headless Chromium, driven over WebDriver
//! (chromedriver and fantoccini), against a running genjobs: the playground and the account page
//! (`playground`), the operators' console (`console`). Needs Debian's `chromium` and
//! `chromium-driver` (`.ci/run` installs them); without them the tests fail and say so.
//!
//! `GENJOBS_CHROMIUM` and `GENJOBS_CHROMEDRIVER` name other binaries than Debian's.
//! `GENJOBS_UPDATE_SCREENSHOT=1` also writes the screenshots shown in the README and
//! `docs/operators.md` to `docs/`.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

mod console;
mod playground;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use genjobs_test_wait::{eventually, wait_until};
use serde_json::{Value, json};

/// Debian's paths; `GENJOBS_CHROMEDRIVER` and `GENJOBS_CHROMIUM` name others.
fn program(variable: &str, debian: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| debian.to_owned())
}

/// A chromedriver process, stopped on drop.
pub struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A chromedriver listening on a free port, with Debian's or the named binaries.
pub async fn chromedriver() -> Driver {
    let (driver, chromium) =
        (program("GENJOBS_CHROMEDRIVER", "/usr/bin/chromedriver"), program("GENJOBS_CHROMIUM", "/usr/bin/chromium"));
    for path in [&driver, &chromium] {
        assert!(
            std::path::Path::new(path).exists(),
            "{path} is missing: `cargo xtask test` installs Debian's chromium and chromium-driver"
        );
    }
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(&driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let driver = Driver { child, url: format!("http://127.0.0.1:{port}") };
    let listening = async || tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok();
    assert!(eventually(Duration::from_secs(30), listening).await, "chromedriver did not listen on port {port}");
    driver
}

/// A headless Chromium session of `driver`, 1280×860.
pub async fn browser(driver: &Driver) -> Client {
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": program("GENJOBS_CHROMIUM", "/usr/bin/chromium"),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,860"]
        }
    });
    let Value::Object(capabilities) = capabilities else { unreachable!("an object literal") };
    ClientBuilder::rustls().unwrap().capabilities(capabilities).connect(&driver.url).await.unwrap()
}

/// Runs `script` (a function body returning a value) until it returns something truthy, for at
/// most 30 s.
pub async fn until(page: &Client, what: &str, script: &str) -> Value {
    let truthy = |value: &Value| match value {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        _ => true,
    };
    wait_until(Duration::from_secs(30), what, async || page.execute(script, vec![]).await.unwrap(), truthy).await
}

/// The page as a PNG; with `GENJOBS_UPDATE_SCREENSHOT` set, also written to `docs/{name}.png`
/// for the README and `docs/operators.md`.
pub async fn screenshot(page: &Client, name: &str) {
    let png = page.screenshot().await.unwrap();
    assert_eq!(&png[1..4], b"PNG");
    if std::env::var_os("GENJOBS_UPDATE_SCREENSHOT").is_some() {
        std::fs::write(format!("{}/../docs/{name}.png", env!("CARGO_MANIFEST_DIR")), &png).unwrap();
    }
}
