//! A restart on Postgres with only `DATABASE_URL` set, as docs/deployment.md's one-liner starts it:
//! the admin token printed by the first start, users' webhook secrets and the output links minted
//! before all still work, and the token is printed by the first start only; `genjobs admin-token`
//! replaces it for the next start. The built-in simulator comes back on its port: a job running
//! at the restart ends at once, and earlier links to its files still answer.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use genjobs_test_postgres::TestDatabase;
use genjobs_test_wait::wait_until;
use genjobs_tests::TestApp;
use serde_json::{Value, json};

/// A `genjobs` process on `db` with no secret configured, and the lines it printed before its
/// upstream line.
struct Started {
    child: Child,
    app: TestApp,
    printed: Vec<String>,
}

impl Started {
    /// Started with `vars` besides a fast simulator on any free port.
    fn on(db: &TestDatabase, vars: &[(&str, &str)]) -> Started {
        let mut child = Command::new(env!("CARGO_BIN_EXE_genjobs"))
            .env_clear()
            .env("DATABASE_URL", &db.url)
            .env("GENJOBS_BIND", "127.0.0.1:0")
            .env("GENJOBS_SIM_PORT", "0")
            .env("GENJOBS_SIM_QUEUE_MS", "20")
            .env("GENJOBS_SIM_RUN_MS", "200")
            .env("GENJOBS_POLL_INTERVAL_MS", "50")
            .envs(vars.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut printed = Vec::new();
        while !printed.last().is_some_and(|l: &String| l.starts_with("upstream: ")) {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "genjobs exited early: {printed:?}");
            printed.push(line.trim_end().to_owned());
        }
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let base = printed[0].trim_start_matches("genjobs listening on ").to_owned();
        let sim = printed.last().unwrap().trim_start_matches("upstream: built-in fal simulator at ").to_owned();
        Started { child, app: TestApp::remote(base, sim), printed }
    }

    fn admin_token(&self) -> Option<String> {
        self.printed.iter().find_map(|l| l.strip_prefix("admin token: gja_")).map(|t| format!("gja_{t}"))
    }

    async fn stop(mut self) {
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        let exit = async || self.child.try_wait().unwrap();
        wait_until(Duration::from_secs(30), "the exit after SIGTERM", exit, Option::is_some).await;
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn json_of(response: reqwest::Response, status: u16) -> Value {
    let code = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(code, status, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_tokens_and_links_survive_a_restart_with_only_database_url() {
    let db = TestDatabase::new().await;
    let outputs = std::env::temp_dir().join(format!("genjobs-restart-{}", std::process::id()));
    let store = format!("file://{}", outputs.display());
    let vars = [("GENJOBS_OUTPUT_STORE", store.as_str())];
    let first = Started::on(&db, &vars);
    let token = first.admin_token().unwrap_or_else(|| panic!("no token printed: {:?}", first.printed));
    let created = first.app.post("/api/admin/users", &token, &json!({"name": "ada", "credits": 100})).await;
    let user = json_of(created, 201).await;
    let key = user["api_key"].as_str().unwrap().to_owned();
    let secret = json_of(first.app.get("/api/v1/account/webhook-secret", &key).await, 200).await;
    let receipt = first.app.submit("images", &key, json!({"prompt": "a lighthouse"})).await;
    let job = first.app.wait_final(&key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let link = job["outputs"][0]["url"].as_str().unwrap().to_owned();
    let path = link.strip_prefix(&first.app.url("")).unwrap().to_owned();
    first.stop().await;

    let second = Started::on(&db, &vars);
    assert_eq!(second.admin_token(), None, "printed by the first start only: {:?}", second.printed);
    assert!(second.printed.iter().any(|l| l.starts_with("admin token: the last one printed")), "{:?}", second.printed);
    let ada = format!("/api/admin/users/{}", user["id"].as_str().unwrap());
    let read = second.app.get(&ada, &token).await;
    assert_eq!(json_of(read, 200).await["name"], "ada", "the first start's token still works");
    let again = json_of(second.app.get("/api/v1/account/webhook-secret", &key).await, 200).await;
    assert_eq!(again, secret, "the webhook secret still opens, unchanged");
    let file = second.app.client.get(second.app.url(&path)).send().await.unwrap();
    assert_eq!(file.status(), 200, "a link minted before the restart still verifies");
    assert_eq!(file.headers()["content-type"], "image/png");
    second.stop().await;

    let made = Command::new(env!("CARGO_BIN_EXE_genjobs"))
        .arg("admin-token")
        .env_clear()
        .env("DATABASE_URL", &db.url)
        .output()
        .unwrap();
    assert_eq!(made.status.code(), Some(0), "{}", String::from_utf8_lossy(&made.stderr));
    assert!(
        made.stderr.is_empty(),
        "a one-shot command prints no log lines: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let stdout = String::from_utf8(made.stdout).unwrap();
    let new_token = stdout.trim().strip_prefix("admin token: ").unwrap().to_owned();
    assert!(new_token.starts_with("gja_") && new_token != token, "{stdout}");
    let third = Started::on(&db, &vars);
    let banner = third.printed.iter().find(|l| l.starts_with("admin token: ")).unwrap();
    assert!(banner.contains("`genjobs admin-token`"), "the banner points at the token it printed too: {banner}");
    assert_eq!(json_of(third.app.get(&ada, &new_token).await, 200).await["name"], "ada");
    let old = json_of(third.app.get(&ada, &token).await, 401).await;
    assert_eq!(old["error"]["code"], "INVALID_API_KEY", "the replaced token is refused: {old}");
    third.stop().await;
    let _ = std::fs::remove_dir_all(outputs);
}

/// A loopback port free now, for a simulator that must come back on the same one: below the
/// kernel's ephemeral range (32768 and up), so that no connection of this or another test is
/// given it while the simulator is down between the two starts.
fn free_port() -> String {
    let start = 20_000 + u16::try_from(std::process::id() % 10_000).unwrap();
    (start..30_000)
        .chain(20_000..start)
        .find(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port between 20000 and 30000")
        .to_string()
}

/// On Postgres with the built-in simulator and no output store, as the one-liner starts it, the
/// simulator comes back on its port: a job running at the restart is failed and its credits
/// released at its next poll (the new simulator does not know the request), not held until the
/// job timeout; and an earlier job's output link, which names the simulator, still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_ends_the_running_job_at_once_and_earlier_links_still_answer() {
    let db = TestDatabase::new().await;
    let port = free_port();
    let vars = [("GENJOBS_SIM_PORT", port.as_str()), ("GENJOBS_LEASE_SECS", "1")];
    let first = Started::on(&db, &vars);
    let token = first.admin_token().unwrap_or_else(|| panic!("no token printed: {:?}", first.printed));
    let created = first.app.post("/api/admin/users", &token, &json!({"name": "ada", "credits": 100})).await;
    let user = json_of(created, 201).await;
    let key = user["api_key"].as_str().unwrap().to_owned();
    let done = first.app.submit("images", &key, json!({"prompt": "a lighthouse"})).await;
    let done = first.app.wait_final(&key, done["job_id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let link = done["outputs"][0]["url"].as_str().unwrap().to_owned();
    assert!(link.starts_with(&first.app.sim_url), "no output store: the link names the simulator: {link}");
    let running = first.app.submit("images", &key, json!({"prompt": "a long one [sim:hang]"})).await;
    let running = running["job_id"].as_str().unwrap().to_owned();
    first.app.job_until(&key, &running, Duration::from_secs(10), |job| job["state"] == "running").await;
    let sim = first.app.sim_url.clone();
    first.stop().await;

    let second = Started::on(&db, &vars);
    assert_eq!(second.app.sim_url, sim, "the simulator is back on its port");
    let ended = second.app.final_unwatched(&key, &running).await;
    assert_eq!(ended["state"], "failed", "{ended}");
    assert_eq!(ended["error"]["code"], "UPSTREAM_FAILED", "{ended}");
    let ada = format!("/api/admin/users/{}", user["id"].as_str().unwrap());
    let ada = json_of(second.app.get(&ada, &token).await, 200).await;
    assert_eq!(ada["credits_held"], 0, "the running job's credits are released: {ada}");
    let file = second.app.client.get(&link).send().await.unwrap();
    assert_eq!(file.status(), 200, "an output link of the first start still answers");
    assert_eq!(file.headers()["content-type"], "image/png");
    second.stop().await;
}
