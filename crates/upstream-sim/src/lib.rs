//! # genjobs-upstream-sim
//!
//! A simulator of fal's queue API, so that the embedded default, the tests and the benchmarks
//! run the real fal adapter over real HTTP. It refuses what fal refuses, by the same endpoint
//! schemas the adapter's routes were checked against (`genjobs_upstream_fal::schema`): an unknown
//! endpoint id gets 404, a body fal would refuse (unknown parameter, wrong type, value outside its
//! enum or range, missing required field) 422 with fal's `detail` list. It queues each request,
//! runs it for a configurable time while writing `progress: N%` lines into its logs, and answers
//! with the endpoint's own output shape (a video file, or images with or without their size, a
//! seed where the model gives one). The files it names are real and served (`files`): PNGs of the
//! requested size and a small MP4.
//!
//! ## Fault injection
//! Directives in the prompt (or in `SimConfig`) change one request's fate:
//! - `[sim:reject]`: the result is a 422 refusal; `[sim:reject-submit]`: the submission is.
//! - `[sim:content-policy]`: the result is a 422 whose `detail[].type` is
//!   `content_policy_violation`; `[sim:content-policy-submit]`: the submission is.
//! - `[sim:fail]`: the result is a 500 with a `detail` (and, with `[sim:billable=N]`, fal's
//!   `x-fal-billable-units: N`, as fal bills a run that failed).
//! - `[sim:hang]`: the request never completes.
//! - `[sim:run=MS]`: it runs for MS milliseconds; `[sim:queue=MS]`: it waits MS milliseconds in
//!   the queue first (its `queue_position` counts the queued requests accepted before it).
//! - `[sim:flaky=N]`: its first N status calls answer 503.
//! - `[sim:malformed]`: the result is not of the output shape.
//! - `[sim:expired]`: the result is gone (404) when fetched, as fal's is 6 minutes after completion.
//! - `[sim:error-status]`: the request completes with `error` and `error_type` in its status, and
//!   its result is a 503 with `X-Fal-Error-Type`.
//! - `[sim:file-missing]`: its output files answer 404 (as a provider's expired link does).
//! - `[sim:result-429=N]`, `[sim:result-502=N]`, `[sim:result-503=N]`, `[sim:result-504=N]`: its
//!   first N result calls answer that status without fal's error category (429 with
//!   `Retry-After: 1`), as a busy or restarting queue does; `[sim:result-drop=N]`: they drop the
//!   connection after the headers.
//! - `[sim:cancel-completed]`: it completes when a cancel comes (even a `hang`), and the cancel is
//!   answered 400 `{"status": "ALREADY_COMPLETED"}`, as fal answers a cancel that came too late.
//! - `[sim:webhook-error]`: its webhook is an `ERROR` without validation details (fal's `error`,
//!   no `payload`), as fal reports a run that failed.
//!
//! [`SimArgs`] are its settings on the `genjobs` command line.
//!
//! ## Per-key concurrency
//! With `SimConfig::max_in_progress_per_key` (`SIM_MAX_IN_PROGRESS_PER_KEY`,
//! `GENJOBS_SIM_MAX_IN_PROGRESS_PER_KEY` for the built-in one) above zero, each key (the
//! `Authorization` value) runs only that many requests at once, as a fal account does; the rest
//! stay `IN_QUEUE` (with their `queue_position`) until one of that key's requests ends (see
//! `slots`).
//!
//! ## Webhooks
//! A submission with `?fal_webhook=URL` gets its end delivered there, signed as fal signs, with
//! the simulator's own key published at `/.well-known/jwks.json` ([`RunningSim::jwks_url`]);
//! `[sim:webhook-drop]`, `[sim:webhook-duplicate]`, `[sim:webhook-delay=MS]` and
//! `[sim:webhook-corrupt]` change a delivery's fate (see `notifications`).
//!
//! With the `stats` feature (on by default, off in the `genjobs` binary, which has no use for it),
//! `GET /_sim/stats` counts the calls received, per route and per request id (with each key's
//! most requests not completed and in progress at once, and the submissions of each prompt, so
//! that a job sent twice shows); `GET /_sim/polls` gives the time of every status call per
//! request id (milliseconds since the simulator started), so that tests and benchmarks can check
//! the provider's load and the poll interval (webhook deliveries count as `webhook`, and those
//! answered 2xx as `webhook_accepted`); `GET /_sim/requests` gives each request's prompt, key and
//! times ([`Timeline`]); `POST /_sim/rotate-key` replaces the signing key,
//! and `POST /_sim/sign?request_id=…` answers
//! the headers that sign its body as a delivery for that request (to test a receiver).
//!
//! ## Moderation
//! `POST /moderations` is an OpenAI-compatible moderation API that flags a word list (see
//! `moderation`), for `GENJOBS_MODERATION_URL`; stats count its calls as `moderations`,
//! `moderations_flagged` and `moderations_failed`.

mod args;
mod chaos;
mod files;
mod moderation;
mod notifications;
mod open;
mod requests;
mod results;
mod slots;
#[cfg(feature = "stats")]
mod stats;

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use actix_web::dev::{Server, ServerHandle};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use open::OpenRequests;
use requests::{Directives, Phase, SimRequest};
use serde::Deserialize;
use serde_json::{Value, json};

pub use args::{EMBEDDED_IN_PROGRESS_PER_KEY, EMBEDDED_PORT, SimArgs};
pub use moderation::FLAGGED_WORDS;

/// How the simulator behaves by default.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Time a request waits in the queue.
    pub queue: Duration,
    /// Time a request runs.
    pub run: Duration,
    /// When set, requests must carry `Authorization: Key <this>`.
    pub api_key: Option<String>,
    /// Probability (0 to 1) that a call fails at random, for soak tests (see `chaos`).
    pub chaos: f64,
    /// Pause before a webhook delivery that was not answered 2xx is tried again; doubled each
    /// time (fal spreads its 10 tries over 2 hours).
    pub webhook_retry: Duration,
    /// Requests of one key (its `Authorization`) in progress at once, as a fal account's
    /// concurrency limit; those beyond it stay `IN_QUEUE` until one of that key's requests ends
    /// (see `slots`). 0: no limit.
    pub max_in_progress_per_key: u32,
    /// The loopback port [`spawn`] listens on; 0: any free port.
    pub port: u16,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            queue: Duration::from_millis(500),
            run: Duration::from_secs(6),
            api_key: None,
            chaos: 0.0,
            webhook_retry: Duration::from_secs(1),
            max_in_progress_per_key: 0,
            port: 0,
        }
    }
}

#[cfg(feature = "stats")]
pub use stats::{SimStats, Timeline};

/// Every request taken, by id, and the index of those not completed, under one lock so that the
/// index never disagrees with the requests.
#[derive(Default)]
struct Requests {
    all: HashMap<String, SimRequest>,
    open: OpenRequests,
}

struct SimState {
    requests: Mutex<Requests>,
    /// `SimConfig::max_in_progress_per_key`.
    slots_per_key: u32,
    #[cfg(feature = "stats")]
    recorder: stats::Recorder,
}

impl SimState {
    fn new(slots_per_key: u32) -> Self {
        Self {
            requests: Mutex::default(),
            slots_per_key,
            #[cfg(feature = "stats")]
            recorder: stats::Recorder::default(),
        }
    }

    /// The requests, with every slot that freed since the last look handed to a waiting one.
    fn requests(&self) -> MutexGuard<'_, Requests> {
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        if self.slots_per_key > 0 {
            for admission in slots::admit_waiting(&mut requests.all, self.slots_per_key, Instant::now()) {
                requests.open.file(&admission.id, admission.key.as_deref(), admission.end);
                self.in_progress(admission.key.as_deref(), admission.in_progress);
            }
        }
        requests
    }

    /// Records that `key` had `in_progress` requests holding a slot at once.
    #[cfg_attr(not(feature = "stats"), allow(clippy::unused_self, unused_variables))]
    fn in_progress(&self, key: Option<&str>, in_progress: u64) {
        #[cfg(feature = "stats")]
        self.recorder.in_progress(key, in_progress);
    }

    #[cfg_attr(not(feature = "stats"), allow(clippy::unused_self, unused_variables))]
    fn count(&self, route: &str, request_id: Option<&str>) {
        #[cfg(feature = "stats")]
        self.recorder.count(route, request_id);
    }

    /// Records a submission of `prompt` with `key`, which now has `in_flight` requests not
    /// completed; `low` when it asked for fal's low queue priority.
    #[cfg_attr(not(feature = "stats"), allow(clippy::unused_self, unused_variables))]
    fn submitted(&self, key: Option<&str>, prompt: &str, in_flight: u64, low: bool) {
        #[cfg(feature = "stats")]
        self.recorder.submitted(key, prompt, in_flight, low);
    }

    /// Records that a fault of chaos struck a submission of `prompt`.
    #[cfg_attr(not(feature = "stats"), allow(clippy::unused_self, unused_variables))]
    fn submit_faulted(&self, prompt: &str) {
        #[cfg(feature = "stats")]
        self.recorder.submit_faulted(prompt);
    }
}

/// The key a call carries: its `Authorization` header.
fn caller(req: &HttpRequest) -> Option<String> {
    req.headers().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// How many requests of `key` have not completed.
fn in_flight_of(sim: &Sim, key: Option<&str>) -> u64 {
    sim.state.requests().open.count(key, Instant::now())
}

/// Whether the call may read or cancel request `id`: as at fal, a request answers only the
/// account that submitted it, so a call with another key is refused.
fn owned_by_caller(sim: &Sim, req: &HttpRequest, id: &str) -> bool {
    let caller = caller(req);
    sim.state.requests().all.get(id).is_none_or(|request| request.key == caller)
}

fn other_key() -> HttpResponse {
    HttpResponse::Forbidden().json(json!({"detail": "The request belongs to another key"}))
}

struct Sim {
    config: SimConfig,
    state: SimState,
    keys: notifications::Keys,
    client: reqwest::Client,
    moderation_checks: moderation::Checks,
}

/// A simulator serving on a loopback port.
pub struct RunningSim {
    /// Base URL, e.g. `http://127.0.0.1:40123`, to use as `GENJOBS_UPSTREAM_URL`.
    pub base_url: String,
    handle: ServerHandle,
    #[cfg(feature = "stats")]
    sim: Arc<Sim>,
}

impl RunningSim {
    /// The calls received so far.
    #[cfg(feature = "stats")]
    #[must_use]
    pub fn stats(&self) -> SimStats {
        self.sim.state.recorder.stats()
    }

    /// Where the simulator publishes the key it signs webhooks with, to use as
    /// `GENJOBS_FAL_JWKS_URL`.
    #[must_use]
    pub fn jwks_url(&self) -> String {
        format!("{}/.well-known/jwks.json", self.base_url)
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
    let client = reqwest::Client::builder().timeout(Duration::from_secs(15)).build().map_err(std::io::Error::other)?;
    let state = SimState::new(config.max_in_progress_per_key);
    let sim = Arc::new(Sim {
        config,
        state,
        keys: notifications::Keys::generate(),
        client,
        moderation_checks: moderation::Checks::default(),
    });
    let data = web::Data::from(Arc::clone(&sim));
    let base = web::Data::new(base_url.clone());
    let server = HttpServer::new(move || {
        let app = App::new()
            .app_data(data.clone())
            .app_data(base.clone())
            // An edit's images come as data: URIs among the inputs: up to 20 MiB of images,
            // a third more in base64.
            .app_data(web::JsonConfig::default().limit(28 << 20));
        #[cfg(feature = "stats")]
        let app = app
            .configure(stats::routes::<Sim>)
            .route(
                "/_sim/rotate-key",
                web::post().to(|sim: web::Data<Sim>| async move {
                    sim.keys.rotate();
                    HttpResponse::NoContent().finish()
                }),
            )
            .route("/_sim/sign", web::post().to(notifications::sign))
            .route(
                "/_sim/requests",
                web::get().to(|sim: web::Data<Sim>| async move { HttpResponse::Ok().json(sim.timelines()) }),
            );
        app.route("/_sim/files/{id}/{name}", web::get().to(files::serve))
            .route("/.well-known/jwks.json", web::get().to(|sim: web::Data<Sim>| async move { sim.keys.jwks() }))
            .route("/{owner}/{app}/requests/{id}/status", web::get().to(results::status))
            .route("/{owner}/{app}/requests/{id}/cancel", web::put().to(cancel))
            .route("/{owner}/{app}/requests/{id}", web::get().to(results::result))
            .route("/moderations", web::post().to(moderation::moderate))
            .route("/{endpoint:.+}", web::post().to(submit))
    })
    .workers(1)
    // Idle connections are kept longer than the adapter keeps them in its pool, as providers'
    // servers do: actix's 5 s closed one just as a submission reused it, and a body of several
    // MiB was cut on the way (an ambiguous submission, which fails the job).
    .keep_alive(Duration::from_secs(120))
    .disable_signals()
    .listen(listener)?
    .run();
    let handle = server.handle();
    Ok((
        server,
        RunningSim {
            base_url,
            handle,
            #[cfg(feature = "stats")]
            sim,
        },
    ))
}

/// Starts the simulator on its loopback port (`SimConfig::port`, any free one when 0) in the
/// current tokio runtime.
///
/// # Errors
/// When the port cannot be bound (taken by another process).
pub fn spawn(config: SimConfig) -> std::io::Result<RunningSim> {
    let listener = TcpListener::bind(("127.0.0.1", config.port))?;
    let (server, running) = server(config, listener)?;
    tokio::spawn(server);
    Ok(running)
}

fn authorized(sim: &Sim, req: &HttpRequest) -> bool {
    let Some(key) = &sim.config.api_key else {
        return true;
    };
    req.headers().get("authorization").and_then(|v| v.to_str().ok()) == Some(format!("Key {key}").as_str())
}

/// Counts a call, checks its key and draws its fault; `Err` is the answer to give at once.
async fn admit(
    sim: &Sim,
    req: &HttpRequest,
    route: &str,
    id: Option<&str>,
) -> Result<Option<chaos::Fault>, HttpResponse> {
    let fault = checked(sim, req, route, id).map_err(|answer| *answer)?;
    match chaos::before(fault).await {
        Some(answer) => Err(answer),
        None => Ok(fault),
    }
}

/// [`admit`] without the fault's first half (an unavailable queue, a hang), for a caller that
/// records the fault first.
fn checked(
    sim: &Sim,
    req: &HttpRequest,
    route: &str,
    id: Option<&str>,
) -> Result<Option<chaos::Fault>, Box<HttpResponse>> {
    sim.state.count(route, id);
    if !authorized(sim, req) {
        return Err(Box::new(unauthorized()));
    }
    if let Some(id) = id
        && !owned_by_caller(sim, req, id)
    {
        return Err(Box::new(other_key()));
    }
    let fault = chaos::draw(sim.config.chaos);
    if let Some(fault) = fault {
        sim.state.count(fault.name(), None);
    }
    Ok(fault)
}

fn unauthorized() -> HttpResponse {
    HttpResponse::Unauthorized().json(json!({"detail": "No valid key"}))
}

fn not_found() -> HttpResponse {
    HttpResponse::NotFound().json(json!({"detail": "Request not found"}))
}

fn app_prefix(endpoint: &str) -> String {
    endpoint.split('/').take(2).collect::<Vec<_>>().join("/")
}

/// The submission's query: fal takes the webhook URL there.
#[derive(Deserialize)]
struct SubmitQuery {
    fal_webhook: Option<String>,
}

async fn submit(
    sim: web::Data<Sim>,
    base: web::Data<String>,
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<SubmitQuery>,
    body: web::Json<Value>,
) -> HttpResponse {
    let body = body.into_inner();
    let prompt = body.get("prompt").and_then(Value::as_str).unwrap_or_default().to_owned();
    let fault = match checked(&sim, &req, "submit", None) {
        Ok(fault) => fault,
        Err(answer) => return *answer,
    };
    if fault.is_some() {
        sim.state.submit_faulted(&prompt);
    }
    if let Some(answer) = chaos::before(fault).await {
        return answer;
    }
    let webhook = query.into_inner().fal_webhook;
    let key = caller(&req);
    let low = req.headers().get("x-fal-queue-priority").is_some_and(|value| value == "low");
    let answer = submit_answer(&sim, base.as_str(), path.into_inner(), body, webhook, key.clone());
    if answer.status().is_success() {
        let in_flight = in_flight_of(&sim, key.as_deref());
        sim.state.submitted(key.as_deref(), &prompt, in_flight, low);
        if sim.config.max_in_progress_per_key == 0 {
            // Without a limit every request not completed is in progress.
            sim.state.in_progress(key.as_deref(), in_flight);
        }
    }
    chaos::after(fault, answer)
}

fn submit_answer(
    sim: &web::Data<Sim>,
    base: &str,
    endpoint: String,
    input: Value,
    webhook: Option<String>,
    key: Option<String>,
) -> HttpResponse {
    let Some(schema) = genjobs_upstream_fal::schema::endpoint(&endpoint) else {
        return HttpResponse::NotFound().json(json!({"detail": format!("Application '{endpoint}' not found")}));
    };
    // fal takes any JSON into the queue and refuses a body it cannot use when the request runs.
    let invalid = schema.validate(&input).err().map(|violations| json!(violations));
    if let Some(url) = &webhook
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return HttpResponse::UnprocessableEntity().json(json!({"detail": [
            {"loc": ["query", "fal_webhook"], "msg": "fal_webhook must be an http or https URL", "type": "value_error.url"}
        ]}));
    }
    let prompt = input.get("prompt").and_then(Value::as_str).unwrap_or_default();
    let directives = Directives::from_prompt(prompt);
    if directives.reject_submit {
        return HttpResponse::UnprocessableEntity().json(refusal());
    }
    if directives.content_policy_submit {
        return HttpResponse::UnprocessableEntity().json(content_policy_violation());
    }
    let request_id = uuid::Uuid::new_v4().to_string();
    let urls = format!("{base}/{}/requests/{request_id}", app_prefix(&endpoint));
    let run = directives.run_ms.map_or(sim.config.run, Duration::from_millis);
    let queue = directives.queue_ms.map_or(sim.config.queue, Duration::from_millis);
    if let Some(url) = webhook
        && !directives.hang
    {
        let files = format!("{base}/_sim/files/{request_id}");
        tokio::spawn(notifications::notify_at_end(sim.clone(), url, request_id.clone(), files, queue + run));
    }
    let mut requests = sim.state.requests();
    let accepted = Instant::now();
    // With a limit, it takes a slot when `slots` finds one free (at the next look, which comes
    // at once: the submission counts its key's requests in flight).
    let admitted = (sim.config.max_in_progress_per_key == 0).then_some(accepted);
    let request = SimRequest {
        shape: schema.output,
        input,
        accepted,
        admitted,
        queue,
        run,
        directives,
        status_calls: 0,
        result_calls: 0,
        canceled: false,
        completed: false,
        ended_at: None,
        invalid,
        key,
    };
    requests.open.file(&request_id, request.key.as_deref(), request.end());
    requests.all.insert(request_id.clone(), request);
    drop(requests);
    HttpResponse::Ok().json(json!({
        "request_id": request_id,
        "response_url": urls,
        "status_url": format!("{urls}/status"),
        "cancel_url": format!("{urls}/cancel"),
        "status": "IN_QUEUE",
        "queue_position": 0,
    }))
}

/// fal's answer when its content policy refuses a request (`[sim:content-policy]`).
pub(crate) fn content_policy_violation() -> Value {
    json!({"detail": [{"loc": ["body", "prompt"], "msg": "The content could not be processed because it contained material flagged by a content checker.", "type": "content_policy_violation"}]})
}

fn refusal() -> Value {
    json!({"detail": [{"loc": ["body", "prompt"], "msg": "prompt refused by the content policy", "type": "value_error"}]})
}

async fn cancel(sim: web::Data<Sim>, req: HttpRequest, path: web::Path<(String, String, String)>) -> HttpResponse {
    let (_, _, id) = path.into_inner();
    sim.state.count("cancel", Some(&id));
    if !authorized(&sim, &req) {
        return unauthorized();
    }
    if !owned_by_caller(&sim, &req, &id) {
        return other_key();
    }
    let mut requests = sim.state.requests();
    let Some(request) = requests.all.get_mut(&id) else {
        return HttpResponse::NotFound().json(json!({"status": "NOT_FOUND"}));
    };
    if request.directives.cancel_completed {
        request.directives.hang = false;
        request.completed = true;
    }
    if request.completed && request.ended_at.is_none() {
        request.ended_at = Some(Instant::now());
    }
    if matches!(request.phase(), Phase::Completed) {
        requests.open.close(&id);
        return HttpResponse::BadRequest().json(json!({"status": "ALREADY_COMPLETED"}));
    }
    request.canceled = true;
    request.ended_at = Some(Instant::now());
    request.directives.fail = true;
    requests.open.close(&id);
    HttpResponse::Accepted().json(json!({"status": "CANCELLATION_REQUESTED"}))
}

#[cfg(feature = "stats")]
impl Sim {
    /// Every request's life so far.
    fn timelines(&self) -> Vec<Timeline> {
        let recorder = &self.state.recorder;
        let requests = self.state.requests();
        requests
            .all
            .values()
            .map(|request| Timeline {
                prompt: request.input.get("prompt").and_then(Value::as_str).unwrap_or_default().to_owned(),
                key: stats::hint(request.key.as_deref()),
                accepted_ms: recorder.epoch_ms(request.accepted),
                ended_ms: request.end().map(|end| recorder.epoch_ms(end)),
            })
            .collect()
    }
}

#[cfg(feature = "stats")]
impl stats::HasRecorder for Sim {
    fn recorder(&self) -> &stats::Recorder {
        &self.state.recorder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_read_from_the_prompt() {
        let d = Directives::from_prompt("a cat [sim:flaky=2] [sim:run=50] [sim:fail]");
        assert_eq!(d, Directives { flaky: 2, run_ms: Some(50), fail: true, ..Directives::default() });
        assert_eq!(Directives::from_prompt("no directives"), Directives::default());
    }

    #[test]
    fn status_and_result_urls_name_only_owner_and_app() {
        assert_eq!(app_prefix("fal-ai/flux-pro/v1.1-ultra"), "fal-ai/flux-pro");
    }
}
