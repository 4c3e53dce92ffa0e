//! # genjobs-upstream-replicate-sim
//!
//! A simulator of Replicate's predictions API for official models, as strict as the real one, so
//! that tests and soak runs drive the real Replicate adapter over real HTTP:
//!
//! - every call needs `Authorization: Bearer <token>` (401 otherwise);
//! - `POST /v1/models/{owner}/{name}/predictions` knows only the models whose schemas the adapter
//!   holds (`genjobs_upstream_replicate::schema`: one copy); any other is 404. The `input` is
//!   checked against the model's schema: a wrong type, a value outside its enum or bounds, a
//!   missing required key or a key the schema does not list is a 422 with `invalid_fields`.
//!   It answers 201 with the prediction, `starting`;
//! - `GET /v1/predictions/{id}` shows it `starting`, then `processing` (with a percentage in its
//!   logs), then `succeeded` with its output URL (or `failed`), as configured time passes;
//! - `POST /v1/predictions/{id}/cancel` cancels a prediction that has not ended and answers it;
//! - `GET /files/{id}/output.{ext}` serves the output as real PNG bytes (`files`);
//! - a prediction created with a `webhook` has its end delivered there, signed as Replicate
//!   signs ([`SimConfig::webhook_secret`], `notifications`).
//!
//! Errors are problem details (`title`, `detail`, `status`; `invalid_fields` on a 422,
//! `retry_after` and `Retry-After` on a 429). Failures are configured as shares of submissions
//! ([`Failures`]) or asked per submission by directives in the prompt (`predictions`).

mod files;
mod notifications;
mod predictions;

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use actix_web::dev::{Server, ServerHandle};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use genjobs_upstream_replicate::schema::{self, InvalidField};
use predictions::{Directives, SimPrediction, new_id};
use serde_json::{Value, json};

/// The webhook secret when none is configured (`whsec_` and the base64 of 32 bytes).
pub const DEFAULT_WEBHOOK_SECRET: &str = "whsec_Z2Vuam9icy1yZXBsaWNhdGUtc2ltdWxhdG9yLWtleSE=";

/// Shares (0 to 1) of submissions that fail, drawn for each.
#[derive(Debug, Clone, Copy, Default)]
pub struct Failures {
    /// Answered 429 with `retry_after`, nothing created.
    pub throttled: f64,
    /// Answered 503, nothing created.
    pub unavailable: f64,
    /// Created, then answered 500.
    pub server_error: f64,
    /// Created, then ending `failed`.
    pub failed: f64,
}

/// How the simulator behaves.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The token calls must carry as `Authorization: Bearer <token>`.
    pub token: String,
    /// Time a prediction stays `starting`.
    pub starting: Duration,
    /// Time a prediction stays `processing`.
    pub processing: Duration,
    /// The secret that signs webhooks, `whsec_<base64>`.
    pub webhook_secret: String,
    /// First pause before a webhook delivery not answered 2xx is tried again; doubled each time.
    pub webhook_retry: Duration,
    /// Failures drawn per submission.
    pub failures: Failures,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            token: "sim-token".into(),
            starting: Duration::from_millis(200),
            processing: Duration::from_secs(2),
            webhook_secret: DEFAULT_WEBHOOK_SECRET.into(),
            webhook_retry: Duration::from_millis(500),
            failures: Failures::default(),
        }
    }
}

/// A creation call as the simulator received it, for tests of the protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateCall {
    /// `owner/name` from the path.
    pub model: String,
    /// The `Prefer` header, if sent.
    pub prefer: Option<String>,
    /// The JSON body.
    pub body: Value,
}

struct Sim {
    config: SimConfig,
    base_url: String,
    predictions: Mutex<HashMap<String, SimPrediction>>,
    calls: Mutex<Vec<CreateCall>>,
    client: reqwest::Client,
}

impl Sim {
    fn predictions(&self) -> MutexGuard<'_, HashMap<String, SimPrediction>> {
        self.predictions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn calls(&self) -> MutexGuard<'_, Vec<CreateCall>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A simulator serving on a loopback port.
pub struct RunningSim {
    /// Where it serves, e.g. `http://127.0.0.1:40123`.
    pub base_url: String,
    handle: ServerHandle,
    sim: Arc<Sim>,
}

impl RunningSim {
    /// The API's base URL (`…/v1`), to use as `GENJOBS_REPLICATE_URL`.
    #[must_use]
    pub fn api_url(&self) -> String {
        format!("{}/v1", self.base_url)
    }

    /// Every creation call received, in order.
    #[must_use]
    pub fn create_calls(&self) -> Vec<CreateCall> {
        self.sim.calls().clone()
    }

    /// How many predictions were created.
    #[must_use]
    pub fn predictions_created(&self) -> usize {
        self.sim.predictions().len()
    }

    /// The headers that sign `body` as a delivery with the id `id`, now, with the configured
    /// secret: to test a receiver with a delivery of one's own.
    #[must_use]
    pub fn sign(&self, id: &str, body: &str) -> Vec<(String, String)> {
        notifications::signed_headers(&self.sim.config.webhook_secret, id, body)
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect()
    }

    /// Stops serving.
    pub async fn stop(&self) {
        self.handle.stop(false).await;
    }
}

/// Builds the simulator's server on `listener`; the caller runs (spawns or awaits) it.
///
/// # Errors
/// When the listener cannot be used.
pub fn server(config: SimConfig, listener: TcpListener) -> std::io::Result<(Server, RunningSim)> {
    let base_url = format!("http://{}", listener.local_addr()?);
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().map_err(std::io::Error::other)?;
    let sim = Arc::new(Sim {
        config,
        base_url: base_url.clone(),
        predictions: Mutex::default(),
        calls: Mutex::default(),
        client,
    });
    let data = web::Data::from(Arc::clone(&sim));
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            // An edit's image comes as a data: URI in the input, as Replicate takes it: up to
            // 20 MiB of image, a third more in base64 (actix reads 256 KiB by default).
            .app_data(web::PayloadConfig::default().limit(28 << 20))
            .route("/v1/models/{owner}/{name}/predictions", web::post().to(create))
            .route("/v1/predictions/{id}", web::get().to(get))
            .route("/v1/predictions/{id}/cancel", web::post().to(cancel))
            .route("/files/{id}/{name}", web::get().to(files::serve))
    })
    .workers(1)
    // Idle connections are kept longer than the adapter keeps them in its pool (60 s), as
    // providers' servers do: actix's 5 s closed one just as a submission reused it.
    .keep_alive(Duration::from_secs(120))
    .disable_signals()
    .listen(listener)?
    .run();
    let handle = server.handle();
    Ok((server, RunningSim { base_url, handle, sim }))
}

/// Starts the simulator on an ephemeral loopback port in the current tokio runtime.
///
/// # Errors
/// When no loopback port can be bound.
pub fn spawn(config: SimConfig) -> std::io::Result<RunningSim> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let (server, running) = server(config, listener)?;
    tokio::spawn(server);
    Ok(running)
}

fn problem(status: u16, title: &str, detail: &str) -> HttpResponse {
    let code =
        actix_web::http::StatusCode::from_u16(status).unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR);
    HttpResponse::build(code)
        .content_type("application/problem+json")
        .body(json!({"title": title, "detail": detail, "status": status}).to_string())
}

fn not_found() -> HttpResponse {
    problem(404, "Not found", "The requested resource could not be found.")
}

fn invalid(faults: &[InvalidField]) -> HttpResponse {
    let detail: String = faults.iter().map(|f| format!("- {}: {}\n", f.field, f.description)).collect();
    HttpResponse::UnprocessableEntity().content_type("application/problem+json").body(
        json!({"title": "Input validation failed", "detail": detail, "status": 422, "invalid_fields": faults})
            .to_string(),
    )
}

/// The 401 for a call without the configured token, if it has not.
fn unauthenticated(sim: &Sim, req: &HttpRequest) -> Option<HttpResponse> {
    let expected = format!("Bearer {}", sim.config.token);
    let given = req.headers().get("authorization").and_then(|v| v.to_str().ok());
    (given != Some(expected.as_str()))
        .then(|| problem(401, "Unauthenticated", "You did not pass a valid authentication token"))
}

/// A number in `[0, 1)`.
fn draw() -> f64 {
    (uuid::Uuid::new_v4().as_u128() >> 64) as u64 as f64 / (u64::MAX as f64 + 1.0)
}

/// The answer a creation is refused with before anything is created, if any.
fn refusal(status: u16) -> HttpResponse {
    if status == 429 {
        return HttpResponse::TooManyRequests()
            .insert_header(("retry-after", "1"))
            .content_type("application/problem+json")
            .body(
                json!({"title": "Request was throttled.", "detail": "Request was throttled. Expected available in 1 second.",
                    "status": 429, "retry_after": 1})
                .to_string(),
            );
    }
    problem(status, "Service unavailable", "The service is temporarily unavailable. Try again later.")
}

/// A creation's `webhook` and `webhook_events_filter`.
struct Hook {
    url: Option<String>,
    events: Option<Vec<String>>,
}

/// The body's `webhook` and `webhook_events_filter`, checked.
fn webhook_of(body: &Value) -> Result<Hook, Vec<InvalidField>> {
    let fault = |field: &str, description: &str| {
        vec![InvalidField { kind: "invalid".into(), field: field.into(), description: description.into() }]
    };
    let url = match body.get("webhook") {
        None | Some(Value::Null) => None,
        Some(Value::String(url)) if url.starts_with("https://") || url.starts_with("http://") => Some(url.clone()),
        Some(_) => return Err(fault("webhook", "webhook must be an http or https URL")),
    };
    let events = match body.get("webhook_events_filter") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let known = ["start", "output", "logs", "completed"];
            let events: Option<Vec<String>> =
                items.iter().map(|e| e.as_str().filter(|e| known.contains(e)).map(str::to_owned)).collect();
            Some(
                events
                    .ok_or_else(|| fault("webhook_events_filter", "events must be start, output, logs or completed"))?,
            )
        }
        Some(_) => return Err(fault("webhook_events_filter", "webhook_events_filter must be a list")),
    };
    Ok(Hook { url, events })
}

async fn create(
    sim: web::Data<Sim>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> HttpResponse {
    let (owner, name) = path.into_inner();
    let model = format!("{owner}/{name}");
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let prefer = req.headers().get("prefer").and_then(|v| v.to_str().ok()).map(str::to_owned);
    sim.calls().push(CreateCall { model: model.clone(), prefer, body: body.clone() });
    if let Some(answer) = unauthenticated(&sim, &req) {
        return answer;
    }
    let Some(schema) = schema::model(&model) else {
        return not_found();
    };
    let Some(input) = body.get("input").filter(|i| i.is_object()) else {
        let fault =
            InvalidField { kind: "required".into(), field: "input".into(), description: "input is required".into() };
        return invalid(&[fault]);
    };
    let hook = match webhook_of(&body) {
        Ok(found) => found,
        Err(faults) => return invalid(&faults),
    };
    if let Err(faults) = schema.validate(input) {
        return invalid(&faults);
    }
    let directives = Directives::from_prompt(input.get("prompt").and_then(Value::as_str).unwrap_or_default());
    let failures = sim.config.failures;
    let fate = draw();
    let drawn_refusal = if fate < failures.throttled {
        Some(429)
    } else if fate < failures.throttled + failures.unavailable {
        Some(503)
    } else {
        None
    };
    if let Some(status) = directives.refuse.or(drawn_refusal) {
        return refusal(status);
    }
    let server_error = directives.server_error || fate >= 1.0 - failures.server_error;
    let prediction = SimPrediction {
        id: new_id(),
        model,
        input: input.clone(),
        created: Instant::now(),
        created_at: time::OffsetDateTime::now_utc(),
        starting: sim.config.starting,
        processing: directives.run_ms.map_or(sim.config.processing, Duration::from_millis),
        fail: directives.fail || directives.nsfw || draw() < failures.failed,
        nsfw: directives.nsfw,
        canceled: None,
        webhook: hook.url,
        events: hook.events,
    };
    let (id, ends_in) = (prediction.id.clone(), prediction.starting + prediction.processing);
    let answer = prediction.json(&sim.base_url);
    sim.predictions().insert(id.clone(), prediction);
    let notifier = sim.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ends_in).await;
        let ended = notifier.predictions().get(&id).is_some_and(|p| p.canceled.is_none());
        if ended {
            notifications::deliver(notifier, id).await;
        }
    });
    if let Some(ms) = directives.stall_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if server_error {
        return problem(500, "Internal server error", "An unexpected error occurred.");
    }
    HttpResponse::Created().json(answer)
}

async fn get(sim: web::Data<Sim>, req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    if let Some(answer) = unauthenticated(&sim, &req) {
        return answer;
    }
    match sim.predictions().get(path.as_str()) {
        Some(prediction) => HttpResponse::Ok().json(prediction.json(&sim.base_url)),
        None => not_found(),
    }
}

async fn cancel(sim: web::Data<Sim>, req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    if let Some(answer) = unauthenticated(&sim, &req) {
        return answer;
    }
    let id = path.into_inner();
    let (answer, newly_canceled) = {
        let mut predictions = sim.predictions();
        let Some(prediction) = predictions.get_mut(&id) else {
            return not_found();
        };
        let was_ended = prediction.ended();
        prediction.cancel();
        (prediction.json(&sim.base_url), !was_ended)
    };
    if newly_canceled {
        tokio::spawn(notifications::deliver(sim.clone(), id));
    }
    HttpResponse::Ok().json(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_read_from_the_prompt() {
        let d = Directives::from_prompt("a fox [sim:503] [sim:run=50] [sim:fail]");
        assert_eq!(d, Directives { refuse: Some(503), run_ms: Some(50), fail: true, ..Directives::default() });
        assert_eq!(Directives::from_prompt("a fox"), Directives::default());
    }

    #[test]
    fn ids_look_like_replicate_ids() {
        let id = new_id();
        assert_eq!(id.len(), 26);
        assert!(id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
        assert_ne!(id, new_id());
    }
}
