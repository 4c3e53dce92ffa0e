//! # genjobs-tests
//!
//! End-to-end tests over real HTTP, in the manner of zero2prod's `spawn_app()`: each test starts
//! its own genjobs on port 0 (the embedded default: in-memory store and the built-in fal
//! simulator, reached through the real fal adapter) with fast timings, and talks to it with
//! reqwest. [`spawn_postgres_app`] does the same on a database of its own, so that the whole
//! suite runs on both stores. [`spawn_gateway`] serves the HTTP edge over hand-built ports
//! instead, for the errors only a broken store can cause.
//!
//! The tests wait for what happens in the background on a condition with a deadline
//! (`genjobs-test-wait`, and [`TestApp::job_until`] on top of it), never for a fixed time.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use futures_util::StreamExt;
use genjobs::{Config, start};
use genjobs_domain::catalog::Catalog;
use genjobs_domain::ids::AdminToken;
use genjobs_domain::usecases::{Ports, Services, Settings};
use genjobs_http::{AppState, HttpSettings};
use genjobs_store_postgres::PgSettings;
use genjobs_test_postgres::TestDatabase;
use genjobs_test_wait::wait_until;
use genjobs_upstream_sim::SimConfig;
use reqwest::{Client, Response, StatusCode};
use serde_json::{Value, json};

pub use insta;

mod receiver;

pub use receiver::{Answer, Received, WebhookReceiver};

/// An insta JSON snapshot of a response body, shared by both stores (`e2e` and `e2e_postgres`
/// run the same modules): named, not prefixed with the module, with ids, keys and times redacted
/// by the selectors given.
#[macro_export]
macro_rules! snapshot {
    ($name:literal, $value:expr $(, { $($selector:literal => $redaction:expr),* $(,)? })?) => {
        $crate::insta::with_settings!({ prepend_module_to_snapshot => false }, {
            $crate::insta::assert_json_snapshot!($name, $value $(, { $($selector => $redaction),* })?);
        });
    };
}

/// The admin token of every test app.
pub const ADMIN_TOKEN: &str = "test-admin-token-of-at-least-32-characters";

/// A running genjobs.
pub struct TestApp {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The demo user's key.
    pub demo_key: String,
    /// The built-in simulator's base URL.
    pub sim_url: String,
    /// A client for the tests.
    pub client: Client,
    /// The database of a Postgres app, dropped with it.
    pub database: Option<TestDatabase>,
    /// Starting it stops the app as SIGTERM does; `None` for an app this process did not start.
    pub drain: Option<genjobs_http::Drain>,
}

/// A user created through the admin API.
#[derive(Debug, Clone)]
pub struct TestUser {
    /// User id.
    pub id: String,
    /// API key.
    pub key: String,
}

/// One parsed server-sent event (or comment / retry line block).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SseEvent {
    /// `event:` field.
    pub event: Option<String>,
    /// `id:` field.
    pub id: Option<String>,
    /// `data:` field, parsed as JSON.
    pub data: Option<Value>,
    /// `retry:` field.
    pub retry: Option<u64>,
    /// A `: comment` line.
    pub comment: Option<String>,
}

/// Fast timings: 50 ms polls, jobs that run for 250 ms.
#[must_use]
pub fn fast_config() -> Config {
    Config {
        bind: "127.0.0.1:0".parse().expect("loopback address"),
        admin_token: Some(ADMIN_TOKEN.into()),
        simulator: SimConfig {
            queue: Duration::from_millis(30),
            run: Duration::from_millis(250),
            webhook_retry: Duration::from_millis(100),
            ..SimConfig::default()
        },
        ..Config::default()
    }
    .with_poll_interval(Duration::from_millis(50))
}

/// [`fast_config`] for requests that carry tens of MiB of images (an edit's, hashed and kept as
/// uploads before its job is accepted, in Postgres when there is no output store): this debug
/// build may take seconds over them, more than the Postgres runs' 2 s lease and their store's 3 s
/// deadline, which are for requests of a few KiB; here both are 30 s.
#[must_use]
pub fn large_job_config() -> Config {
    let defaults = fast_config();
    Config {
        postgres: PgSettings { statement_timeout: Duration::from_secs(30), ..defaults.postgres.clone() },
        driver: defaults.driver.clone().with_lease(Duration::from_secs(30)),
        ..defaults
    }
}

/// [`fast_config`] with fal's webhooks on: the service's public URL is its own loopback address
/// (a port picked free beforehand), and a job nobody watches is polled every `fallback_poll`.
#[must_use]
pub fn webhook_config(fallback_poll: Duration) -> Config {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    let config = Config { bind: SocketAddr::from(([127, 0, 0, 1], port)), ..fast_config() };
    config.with_public_url(format!("http://127.0.0.1:{port}"), fallback_poll)
}

/// [`fast_config`] for client webhooks: receivers on loopback are allowed, the first retry waits
/// 50 ms, and an attempt gives up waiting after `timeout`.
#[must_use]
pub fn client_webhook_config(timeout: Duration) -> Config {
    let defaults = fast_config();
    Config {
        client_webhooks: genjobs_client_webhooks::TransportSettings { timeout, allow_private: true },
        dispatch: genjobs_driver::DispatchSettings {
            deliveries: genjobs_domain::usecases::DeliverySettings {
                retry: genjobs_domain::client_webhooks::RetryPolicy {
                    first_delay: Duration::from_millis(50),
                    ..defaults.dispatch.deliveries.retry
                },
                ..defaults.dispatch.deliveries
            },
            ..defaults.dispatch
        },
        ..defaults
    }
}

/// Starts genjobs with [`fast_config`].
pub async fn spawn_app() -> TestApp {
    spawn_app_with(fast_config()).await
}

/// Starts genjobs with `config` on the in-memory store.
pub async fn spawn_app_with(config: Config) -> TestApp {
    let service = start(config).await.expect("genjobs starts");
    let app = TestApp {
        base: format!("http://{}", service.address),
        demo_key: service.demo_key.clone().expect("demo key"),
        sim_url: service.simulator_url.clone().unwrap_or_default(),
        client: Client::builder().timeout(Duration::from_secs(90)).build().expect("client"),
        database: None,
        drain: Some(service.drain()),
    };
    tokio::spawn(service.run());
    app
}

/// Starts genjobs with `config` on a Postgres database of its own. The Postgres store has no
/// demo user, so one with `demo_credits` is created through the admin API.
pub async fn spawn_postgres_app(config: Config) -> TestApp {
    spawn_on(TestDatabase::new().await, config).await
}

/// [`spawn_postgres_app`] through a PgBouncer in transaction pooling mode, as operators deploy
/// it: `DATABASE_URL` at the pooler, `GENJOBS_DATABASE_POOLER=transaction`, and
/// `GENJOBS_DATABASE_LISTEN_URL` (and the migrations) on the direct connection.
pub async fn spawn_pooled_app(config: Config) -> TestApp {
    spawn_on(TestDatabase::pooled().await, config).await
}

async fn spawn_on(database: TestDatabase, config: Config) -> TestApp {
    let demo_credits = config.demo_credits;
    // A short lease, so that the jobs of a replica that stops are taken over within a test's
    // waits; a test that chose another lease keeps it.
    let lease = if config.driver.steps.lease == fast_config().driver.steps.lease {
        Duration::from_secs(2)
    } else {
        config.driver.steps.lease
    };
    let route = database.settings();
    let config = Config {
        database_url: Some(route.url),
        postgres: PgSettings {
            pool_size: config.postgres.pool_size.min(8),
            pooler: route.pooler,
            listen_url: route.listen_url,
            ..config.postgres
        },
        driver: config.driver.with_lease(lease),
        // The same outputs as the in-memory runs, so that the shared tests see the same answers.
        output_store: config.output_store.or_else(|| Some("memory://".into())),
        ..config
    };
    let service = start(config).await.expect("genjobs starts on Postgres");
    let mut app = TestApp {
        base: format!("http://{}", service.address),
        demo_key: String::new(),
        sim_url: service.simulator_url.clone().unwrap_or_default(),
        client: Client::builder().timeout(Duration::from_secs(90)).build().expect("client"),
        database: Some(database),
        drain: Some(service.drain()),
    };
    tokio::spawn(service.run());
    app.demo_key = app.create_user(demo_credits, json!({"name": "demo"})).await.key;
    app
}

/// Serves the HTTP edge over `ports` on port 0; returns its base URL.
pub async fn spawn_gateway(ports: Ports) -> String {
    let services =
        Services::new(&ports, std::sync::Arc::new(Catalog::builtin().expect("catalog")), Settings::default());
    let state = AppState::new(services, AdminToken::new(ADMIN_TOKEN), b"test link secret", HttpSettings::default());
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(genjobs_http::serve(listener, state).expect("serve"));
    base
}

/// Parses an event stream's text into its blocks.
#[must_use]
pub fn parse_sse(text: &str) -> Vec<SseEvent> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = SseEvent::default();
            for line in block.lines() {
                if let Some(comment) = line.strip_prefix(':') {
                    event.comment = Some(comment.trim().to_owned());
                } else if let Some((field, value)) = line.split_once(':') {
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "event" => event.event = Some(value.to_owned()),
                        "id" => event.id = Some(value.to_owned()),
                        "data" => event.data = serde_json::from_str(value).ok(),
                        "retry" => event.retry = value.parse().ok(),
                        _ => {}
                    }
                }
            }
            event
        })
        .collect()
}

/// The rest of an open event stream's text, once the server closes it; panics if it is still open
/// after `limit`.
pub async fn read_to_end(response: Response, limit: Duration) -> String {
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let read = async {
        while let Some(Ok(bytes)) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    };
    if tokio::time::timeout(limit, read).await.is_err() {
        panic!("stream still open after {limit:?}:\n{text}");
    }
    text
}

/// The sum of the samples of `name` whose labels contain every one of `labels`, in a scrape of
/// `/metrics`.
#[must_use]
pub fn sample_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| line.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])))
        .filter(|line| labels.iter().all(|label| line.contains(label)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Asserts an error envelope of `status`, `type` and `code`; returns the `error` object.
pub async fn assert_error(response: Response, status: u16, kind: &str, code: &str) -> Value {
    assert_eq!(response.status().as_u16(), status, "status of {}", response.url());
    let body: Value = response.json().await.expect("error body is JSON");
    let error = body["error"].clone();
    assert_eq!(error["type"], kind, "{body}");
    assert_eq!(error["code"], code, "{body}");
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    error
}

impl TestApp {
    /// A client of a genjobs already running at `base` (another process, say) whose admin token
    /// is [`ADMIN_TOKEN`], on the simulator at `sim_url`.
    #[must_use]
    pub fn remote(base: String, sim_url: String) -> TestApp {
        let client = Client::builder().timeout(Duration::from_secs(90)).build().expect("client");
        TestApp { base, demo_key: String::new(), sim_url, client, database: None, drain: None }
    }

    /// The job now (`wait` 0) or long-polled for up to `wait` seconds.
    pub async fn job(&self, key: &str, job_id: &str, wait: u64) -> Value {
        let response = self.get(&format!("/api/v1/jobs/{job_id}?wait={wait}"), key).await;
        assert_eq!(response.status(), StatusCode::OK);
        response.json().await.expect("job")
    }

    /// The absolute URL of `path`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `POST` of a JSON body with an API key.
    pub async fn post(&self, path: &str, key: &str, body: &Value) -> Response {
        self.client.post(self.url(path)).bearer_auth(key).json(body).send().await.expect("request")
    }

    /// `GET` with an API key.
    pub async fn get(&self, path: &str, key: &str) -> Response {
        self.client.get(self.url(path)).bearer_auth(key).send().await.expect("request")
    }

    /// `PUT /api/admin/models/{id}` with `document`.
    pub async fn put_model(&self, id: &str, document: &Value) -> Response {
        self.client
            .put(self.url(&format!("/api/admin/models/{id}")))
            .bearer_auth(ADMIN_TOKEN)
            .json(document)
            .send()
            .await
            .expect("request")
    }

    /// The document of model `id` as `GET /api/admin/models` shows it.
    pub async fn admin_model(&self, id: &str) -> Value {
        let models: Value = self.get("/api/admin/models", ADMIN_TOKEN).await.json().await.expect("json");
        models["data"].as_array().expect("data").iter().find(|m| m["id"] == id).cloned().unwrap_or(Value::Null)
    }

    /// The ids `GET /api/v1/models` lists to `key`.
    pub async fn model_ids(&self, key: &str) -> Vec<String> {
        let models: Value = self.get("/api/v1/models", key).await.json().await.expect("json");
        models["data"].as_array().expect("data").iter().filter_map(|m| m["id"].as_str().map(str::to_owned)).collect()
    }

    /// Creates a user through the admin API; `extra` adds fields to the body.
    pub async fn create_user(&self, credits: u64, extra: Value) -> TestUser {
        let mut body = json!({"name": "tester", "credits": credits});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let response = self.post("/api/admin/users", ADMIN_TOKEN, &body).await;
        assert_eq!(response.status(), StatusCode::CREATED);
        let user: Value = response.json().await.expect("json");
        TestUser {
            id: user["id"].as_str().expect("id").to_owned(),
            key: user["api_key"].as_str().expect("key").to_owned(),
        }
    }

    /// Submits to `endpoint` (`video` or `images`), asserting 202; returns the receipt.
    pub async fn submit(&self, endpoint: &str, key: &str, body: Value) -> Value {
        let response = self.post(&format!("/api/v1/{endpoint}/generations"), key, &body).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED, "{:?}", response.text().await);
        response.json().await.expect("receipt")
    }

    /// Reads a job until `condition` holds of it, for at most `limit`; panics with the last read
    /// otherwise. For what long-polling cannot wait on (a change that is not a new state).
    pub async fn job_until(
        &self,
        key: &str,
        job_id: &str,
        limit: Duration,
        condition: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_until(limit, &format!("job {job_id}"), async || self.job(key, job_id, 0).await, condition).await
    }

    /// Reads a job without waiting (a read that waits counts as watching it) until it is final,
    /// for at most 30 s.
    pub async fn final_unwatched(&self, key: &str, job_id: &str) -> Value {
        let is_final = |job: &Value| ["succeeded", "failed", "canceled"].contains(&job["state"].as_str().unwrap_or(""));
        self.job_until(key, job_id, Duration::from_secs(30), is_final).await
    }

    /// Long-polls a job until it is final (or 20 s).
    pub async fn wait_final(&self, key: &str, job_id: &str) -> Value {
        let response = self.get(&format!("/api/v1/jobs/{job_id}?wait=20"), key).await;
        assert_eq!(response.status(), StatusCode::OK);
        response.json().await.expect("job")
    }

    /// The account as operators see it.
    pub async fn user(&self, id: &str) -> Value {
        self.get(&format!("/api/admin/users/{id}"), ADMIN_TOKEN).await.json().await.expect("user")
    }

    /// Reads a whole event stream (until the server closes it, or `limit` passes).
    pub async fn read_stream(&self, job_id: &str, key: &str, limit: Duration) -> (reqwest::header::HeaderMap, String) {
        let response = self.open_stream(job_id, key).await;
        let headers = response.headers().clone();
        (headers, read_to_end(response, limit).await)
    }

    /// Opens a job's event stream: the server has answered, so the stream follows the job from here.
    pub async fn open_stream(&self, job_id: &str, key: &str) -> Response {
        let response = self.get(&format!("/api/v1/jobs/{job_id}/stream"), key).await;
        assert_eq!(response.status(), StatusCode::OK);
        response
    }

    /// The metrics as Prometheus scrapes them, read with the admin token.
    pub async fn metrics(&self) -> String {
        let response = self.get("/metrics", ADMIN_TOKEN).await;
        assert_eq!(response.status(), StatusCode::OK);
        response.text().await.expect("metrics")
    }

    /// What the simulator counted.
    pub async fn sim_stats(&self) -> Value {
        self.client.get(format!("{}/_sim/stats", self.sim_url)).send().await.expect("stats").json().await.expect("json")
    }
}

/// The Python interpreter of the project's tool environment (`scripts/install-python-tools.sh`,
/// run by `cargo xtask test`), which holds the official clients some tests drive genjobs with:
/// `openai` and `standardwebhooks`. Panics, naming the command that installs it, when it is missing.
pub fn python_tools() -> std::path::PathBuf {
    let venv = std::env::var_os("GENJOBS_PY_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tools_cache().join("genjobs/venv"));
    let python = venv.join("bin/python3");
    assert!(
        python.exists(),
        "{} is missing: `cargo xtask test` installs the project's Python tools (scripts/install-python-tools.sh)",
        python.display()
    );
    python
}

/// The directory of the project's Node tools (`scripts/install-node-tools.sh`, run by
/// `cargo xtask test`), which holds the official `openai` package some tests drive genjobs with.
/// Panics, naming the command that installs it, when it is missing.
pub fn node_tools() -> std::path::PathBuf {
    let tools = std::env::var_os("GENJOBS_NODE_TOOLS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tools_cache().join("genjobs/node"));
    let package = tools.join("node_modules/openai/package.json");
    assert!(
        package.exists(),
        "{} is missing: `cargo xtask test` installs the project's Node tools (scripts/install-node-tools.sh)",
        package.display()
    );
    tools
}

/// Where the test tools are installed: `XDG_CACHE_HOME`, else `~/.cache`.
fn tools_cache() -> std::path::PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| std::path::PathBuf::from(home).join(".cache")))
        .expect("neither XDG_CACHE_HOME nor HOME is set")
}
