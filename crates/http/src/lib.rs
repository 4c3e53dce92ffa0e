//! # genjobs-http
//!
//! The actix-web edge of genjobs. Handlers are thin: they parse input into domain types, call one
//! use case of one service of [`Services`] (submissions, reads, cancellations, accounts, client
//! webhooks, provider notifications, admin), and map the result or the use case's error enum to
//! HTTP.
//!
//! ## Layout
//! - `auth`: extractors for API keys (with the three `MISSING_API_KEY` cases) and the admin token.
//! - `body`: JSON bodies, with 415 / 413 / 400 in that order, and the deadline on every body.
//! - `download`: how output files are sent (streamed, ranges, the headers that keep a browser
//!   from running them).
//! - `error`: the error envelope for every status, actix's own 404/405/400 included.
//! - `handlers`: one handler per endpoint; [`ROUTES`] lists them all.
//! - `methods`: HEAD answered as GET without the body, and `Allow` on every 405.
//! - [`openapi`]: the OpenAPI 3.1 document generated from the handlers and the wire types'
//!   schemas.
//! - `pages`: the service's own pages (the front page, the playground, the account page, the
//!   console, `/docs`), their files and the favicon.
//! - `page_policy`: the strict Content-Security-Policy of those pages.
//! - `readiness`: `/readyz` from a store check at most a second old.
//! - `query`: query strings read by name, for the handlers and the wire formats alike.
//! - `redaction`: what a request's log line and span show of its path (keys by prefix only).
//! - `unauthenticated`: the per-address limit on requests answered 401; `known_keys`: the keys
//!   seen valid, which that limit lets through.
//! - [`telemetry`]: request metrics and the Prometheus exposition at `/metrics`.
//! - [`drain`]: the shutdown signal that ends streams and long-polls early.
//! - `waiting`: the waits of long-polls and streams, as the domain's decisions ask.
//! - [`links`]: the signed links to stored outputs, minted at every read of a job.
//! - [`openai`]: the OpenAI-compatible edge at `/openai/v1`, over the same use cases.
//! - [`dto`]: the edge's side of the wire formats, whose types are `genjobs-api`'s (shared with
//!   `genjobs-client`): request bodies read with serde and turned into domain types once, and the
//!   views of domain values as the API's answers.
//!
//! No compression middleware is installed: it would buffer server-sent events.

mod auth;
mod body;
mod download;
pub mod drain;
pub mod dto;
mod error;
mod form;
mod handlers;
mod known_keys;
pub mod links;
mod methods;
pub mod openai;
pub mod openapi;
mod page_policy;
mod pages;
mod query;
mod readiness;
mod redaction;
pub mod telemetry;
mod unauthenticated;
mod waiting;

use std::net::TcpListener;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{App, HttpMessage, HttpResponse, HttpServer, web};
use genjobs_domain::ids::{AdminToken, JobId, UserId};
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::trace::TraceParent;
use genjobs_domain::usecases::Services;
use links::LinkSigner;
use tracing::Instrument;

pub use drain::Drain;
pub use dto::responses::iso;
pub use error::ApiError;
pub use telemetry::Metrics;

/// Settings of the edge itself.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Lifetime of one SSE connection.
    pub stream_max: Duration,
    /// Interval of `: keep-alive` comments on an SSE connection.
    pub keep_alive: Duration,
    /// The `retry:` hint sent first on an SSE connection.
    pub retry_hint: Duration,
    /// Time given to open connections to finish on shutdown.
    pub shutdown_timeout: Duration,
    /// HTTP worker threads; `None` for one per core.
    pub workers: Option<usize>,
    /// The base URL at which clients and the provider reach the service; output links are
    /// rooted there (else at the address each connection came to).
    pub public_url: Option<String>,
    /// How long a minted output link stays valid.
    pub output_url_ttl: Duration,
    /// How long after its headers a request's body must have arrived.
    pub body_read_timeout: Duration,
    /// Whether `Forwarded` and `X-Forwarded-*` are believed: only behind a proxy that sets them.
    pub trust_forwarded: bool,
    /// Unauthenticated requests (answered 401) one client address may make per minute before it
    /// is answered 429 without a look-up.
    pub unauthenticated_per_minute: u32,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            stream_max: Duration::from_secs(60),
            keep_alive: Duration::from_secs(10),
            retry_hint: Duration::from_secs(1),
            shutdown_timeout: Duration::from_secs(10),
            workers: None,
            public_url: None,
            output_url_ttl: Duration::from_secs(3600),
            body_read_timeout: Duration::from_secs(15),
            trust_forwarded: false,
            unauthenticated_per_minute: 600,
        }
    }
}

/// The header that names a request in logs and answers.
const REQUEST_ID: &str = "x-request-id";

/// What every handler shares.
pub struct AppState {
    /// The use cases.
    pub services: Services,
    /// The operators' token.
    pub admin_token: AdminToken,
    /// Settings of the edge.
    pub settings: HttpSettings,
    /// What `/metrics` shows.
    pub metrics: Metrics,
    /// Set when the process stops.
    pub drain: Drain,
    /// Mints and verifies the links to stored outputs.
    pub links: LinkSigner,
    /// The last store check `/readyz` answered with.
    readiness: readiness::Readiness,
    /// Unauthenticated requests by client address.
    unauthenticated: unauthenticated::Unauthenticated,
    /// The keys let in lately, which the allowance of 401s does not stop.
    known_keys: known_keys::KnownKeys,
}

impl AppState {
    /// The state of an edge over `services` whose operators hold `admin_token`, not draining,
    /// with the process's metrics; output links are signed under a key derived from
    /// `link_secret`.
    #[must_use]
    pub fn new(services: Services, admin_token: AdminToken, link_secret: &[u8], settings: HttpSettings) -> Self {
        let links = LinkSigner::new(link_secret, settings.output_url_ttl, settings.public_url.clone())
            // An upload's link lives as long as the upload: one setting, the use cases'.
            .with_upload_ttl(services.uploads.settings().ttl)
            .trusting_forwarded(settings.trust_forwarded);
        Self {
            services,
            admin_token,
            unauthenticated: unauthenticated::Unauthenticated::new(settings.unauthenticated_per_minute),
            known_keys: known_keys::KnownKeys::default(),
            settings,
            metrics: Metrics::install(),
            drain: Drain::new(),
            links,
            readiness: readiness::Readiness::default(),
        }
    }
}

/// 404 for a path no route serves; under `/openai/` in OpenAI's shape, so that OpenAI's clients
/// raise their `NotFoundError` for a call the edge does not answer.
async fn route_not_found(req: actix_web::HttpRequest) -> HttpResponse {
    if req.path().starts_with("/openai/") {
        return actix_web::ResponseError::error_response(&openai::OpenAiError::from(ApiError::route_not_found()));
    }
    actix_web::ResponseError::error_response(&ApiError::route_not_found())
}

async fn method_not_allowed() -> HttpResponse {
    actix_web::ResponseError::error_response(&ApiError::method_not_allowed())
}

fn query_error(e: actix_web::error::QueryPayloadError, _: &actix_web::HttpRequest) -> actix_web::Error {
    ApiError::from(InvalidRequest::body(format!("the query string is not valid: {e}"))).into()
}

fn path_error(_: actix_web::error::PathError, _: &actix_web::HttpRequest) -> actix_web::Error {
    ApiError::route_not_found().into()
}

/// Declares every route once: [`ROUTES`] lists them for the OpenAPI parity test, and `register`
/// gives each its handler, with the 405 envelope for every other method on its path.
macro_rules! routes {
    ($($method:ident $path:literal => $handler:path),* $(,)?) => {
        /// Every route served, as (method, path) with actix's `{param}` syntax, which is also
        /// OpenAPI's.
        pub const ROUTES: &[(&str, &str)] = &[$((stringify!($method), $path)),*];

        fn register(cfg: &mut web::ServiceConfig) {
            // Routes of one path are one resource: actix hands a request to the first resource
            // whose path matches, so a second one would never see its method.
            let mut resources: Vec<(&str, actix_web::Resource)> = Vec::new();
            $(
                let route = web::$method().to($handler);
                match resources.iter().position(|(path, _)| *path == $path) {
                    Some(i) => {
                        let (path, resource) = resources.remove(i);
                        resources.insert(i, (path, resource.route(route)));
                    }
                    // Named by its path, so that its metrics' route label is read without being
                    // built on every request.
                    None => resources.push((
                        $path,
                        web::resource($path).name($path).default_service(web::to(method_not_allowed)).route(route),
                    )),
                }
            )*
            for (_, resource) in resources {
                cfg.service(resource);
            }
        }
    };
}

// Actix tries the routes in this order, each with a path parameter by a regular expression
// (which allocates its captures even to fail): the job's routes, which clients poll, come before
// every other route with a parameter.
routes! {
    post "/api/v1/video/generations" => handlers::create_video,
    post "/api/v1/images/generations" => handlers::create_image,
    get "/api/v1/jobs" => handlers::list_jobs,
    get "/api/v1/jobs/{id}" => handlers::get_job,
    get "/api/v1/jobs/{id}/stream" => handlers::stream_job,
    post "/api/v1/jobs/{id}/cancel" => handlers::cancel_job,
    post "/api/v1/video/generations/quote" => handlers::quote_video,
    post "/api/v1/images/generations/quote" => handlers::quote_image,
    post "/api/v1/batches" => handlers::create_batch,
    get "/api/v1/batches" => handlers::list_batches,
    get "/api/v1/batches/{id}" => handlers::get_batch,
    get "/api/v1/batches/{id}/items" => handlers::batch_items,
    get "/api/v1/batches/{id}/results" => handlers::batch_results,
    post "/api/v1/batches/{id}/cancel" => handlers::cancel_batch,
    get "/api/v1/models" => handlers::list_models,
    get "/api/v1/account" => handlers::account,
    get "/api/v1/account/ledger" => handlers::account_ledger,
    get "/api/v1/account/usage" => handlers::account_usage,
    post "/api/v1/account/keys" => handlers::account_issue_key,
    get "/api/v1/account/keys" => handlers::account_keys,
    delete "/api/v1/account/keys/{prefix}" => handlers::account_revoke_key,
    get "/api/v1/account/webhook-secret" => handlers::webhook_secret,
    post "/api/v1/account/webhook-secret/rotate" => handlers::rotate_webhook_secret,
    get "/api/v1/jobs/{id}/webhooks" => handlers::job_webhooks,
    post "/api/v1/jobs/{id}/webhooks/{event_id}/redeliver" => handlers::redeliver_webhook,
    get "/api/v1/openapi.json" => openapi::openapi_json,
    get "/api/v1/files/{job_id}/{index}" => handlers::output_file,
    post "/api/v1/uploads" => handlers::upload_image,
    get "/api/v1/uploads/{name}" => handlers::uploaded_image,
    post "/api/upstream/{provider}/webhook" => handlers::upstream_webhook,
    post "/api/admin/users" => handlers::admin_create_user,
    get "/api/admin/users" => handlers::admin_users,
    get "/api/admin/users/{id}" => handlers::admin_user,
    patch "/api/admin/users/{id}" => handlers::admin_change_user,
    post "/api/admin/users/{id}/keys" => handlers::admin_issue_key,
    get "/api/admin/users/{id}/keys" => handlers::admin_keys,
    post "/api/admin/users/{id}/credits" => handlers::admin_grant,
    delete "/api/admin/keys/{prefix}" => handlers::admin_revoke_key,
    get "/api/admin/jobs" => handlers::admin_jobs,
    get "/api/admin/batches" => handlers::admin_batches,
    get "/api/admin/batches/{id}" => handlers::admin_batch,
    get "/api/admin/batches/{id}/items" => handlers::admin_batch_items,
    get "/api/admin/jobs/{id}" => handlers::admin_job,
    post "/api/admin/jobs/{id}/cancel" => handlers::admin_cancel_job,
    patch "/api/admin/keys/{prefix}" => handlers::admin_change_key,
    get "/api/admin/usage" => handlers::admin_usage,
    get "/api/admin/reconciliation" => handlers::admin_reconciliation,
    get "/api/admin/models" => handlers::admin_models,
    get "/api/admin/providers" => handlers::admin_providers,
    put "/api/admin/models/{id}" => handlers::admin_put_model,
    delete "/api/admin/models/{id}" => handlers::admin_delete_model,
    get "/healthz" => handlers::healthz,
    get "/readyz" => handlers::readyz,
    get "/metrics" => handlers::metrics,
    get "/" => pages::front_page,
    get "/favicon.ico" => pages::favicon,
    get "/docs" => pages::docs_page,
    get "/docs/{asset}" => pages::docs_asset,
    get "/playground" => pages::playground,
    get "/playground/account" => pages::playground_account,
    get "/playground/{asset}" => pages::playground_asset,
    get "/console" => pages::console,
}

/// Registers every route, with the error envelope on actix's own errors.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.app_data(web::QueryConfig::default().error_handler(query_error))
        .app_data(web::PathConfig::default().error_handler(path_error));
    register(cfg);
    openai::configure(cfg);
    cfg.default_service(web::to(route_not_found));
}

/// The HTTP server on `listener`; the caller runs it, and stops it (with
/// [`actix_web::dev::ServerHandle::stop`]): signals are the binary's to handle, so that it can
/// drain the rest of the process in order.
///
/// # Errors
/// When the listener cannot be used.
pub fn serve(listener: TcpListener, state: AppState) -> std::io::Result<Server> {
    let shutdown_timeout = state.settings.shutdown_timeout.as_secs();
    let (workers, body_read_timeout) = (state.settings.workers, state.settings.body_read_timeout);
    let state = web::Data::new(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap(actix_web::middleware::from_fn(methods::keep_method_rules))
            .wrap(actix_web::middleware::from_fn(move |req, next| body::body_deadline(body_read_timeout, req, next)))
            .wrap(actix_web::middleware::from_fn(log_request))
            .configure(configure)
    })
    .on_connect(links::record_local_addr)
    .shutdown_timeout(shutdown_timeout)
    .disable_signals();
    let server = match workers {
        Some(workers) => server.workers(workers),
        None => server,
    };
    Ok(server.listen(listener)?.run())
}

/// The request's own `X-Request-Id` when it is 1 to 128 visible ASCII characters, else a new one.
fn request_id(req: &actix_web::dev::ServiceRequest) -> HeaderValue {
    req.headers()
        .get(REQUEST_ID)
        .filter(|id| (1..=128).contains(&id.len()) && id.as_bytes().iter().all(u8::is_ascii_graphic))
        .cloned()
        .unwrap_or_else(new_request_id)
}

/// A request id unique across replicas and restarts: a random number drawn once per process,
/// then a count. A random id per request cost a `getrandom` system call on every request
/// (5 % of a GET's time under load).
fn new_request_id() -> HeaderValue {
    static PROCESS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let process = *PROCESS.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair().0);
    let count = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Written digit by digit: `format!` with its padding was a percent of a GET's time.
    let mut id = [0_u8; 32];
    for (digit, nibble) in
        id.iter_mut().zip((0..16).rev().map(|n| process >> (4 * n)).chain((0..16).rev().map(|n| count >> (4 * n))))
    {
        *digit = b"0123456789abcdef"[usize::try_from(nibble & 0xf).unwrap_or(0)];
    }
    // The header takes the bytes as they are: hex digits, always a valid value.
    HeaderValue::from_bytes(&id).unwrap_or_else(|_| HeaderValue::from_static("unnamed"))
}

/// The request's `traceparent`, when it is one.
fn incoming_trace(req: &actix_web::dev::ServiceRequest) -> Option<TraceParent> {
    req.headers().get("traceparent").and_then(|v| v.to_str().ok()).and_then(TraceParent::parse)
}

/// Every response carries `X-Request-Id`; one log line per request, in a span of its own (the
/// client's trace continued when it sent a `traceparent`), with its id, method, path (any key
/// in it by its prefix only), status and duration. The line's values are borrowed from the
/// request where they are written, not copied for it.
async fn log_request(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let started = std::time::Instant::now();
    // The method as the client sent it: a HEAD goes on inside as a GET.
    let (method, id) = (req.method().clone(), request_id(&req));
    let traces = req.app_data::<web::Data<AppState>>().map(|state| state.services.traces()).filter(|t| t.are_on());
    let span = match traces {
        Some(traces) => {
            let span = tracing::info_span!("http.request", http.request.method = %method,
                url.path = %redaction::loggable_path(req.path()), genjobs.job_id = tracing::field::Empty,
                http.response.status_code = tracing::field::Empty);
            // A client's own trace goes on through the request, and from there through its job.
            if let Some(parent) = incoming_trace(&req) {
                traces.continue_trace(&span, &parent);
            }
            span
        }
        // Without traces no span is made: the request's line below says what it did.
        None => tracing::Span::none(),
    };
    let mut response = next.call(req).instrument(span.clone()).await?;
    let _entered = span.enter();
    let request = response.request();
    let status = response.status().as_u16();
    let route =
        request.match_name().map(std::borrow::Cow::Borrowed).or_else(|| request.match_pattern().map(Into::into));
    telemetry::request(route.as_deref().unwrap_or("unmatched"), method.as_str(), status, started.elapsed());
    // The line's fields are made only where the line or the span is kept: under load, with
    // info lines filtered out, they were work of every request for nothing.
    if tracing::enabled!(tracing::Level::INFO) || !span.is_none() {
        // The path as logs may show it: a key it carries, by its prefix only.
        let path = redaction::loggable_path(request.path());
        let extensions = request.extensions();
        // Ids are written into buffers on the stack: their strings were allocations of every line.
        let (mut user_buffer, mut job_buffer) = (uuid::Uuid::encode_buffer(), uuid::Uuid::encode_buffer());
        let user_id = id_text(extensions.get::<UserId>().map(UserId::as_uuid), &mut user_buffer);
        let recorded_job = id_text(extensions.get::<JobId>().map(JobId::as_uuid), &mut job_buffer);
        let job_in_path = path.starts_with("/api/v1/jobs/").then(|| request.match_info().get("id")).flatten();
        let job_in_path = job_in_path.map(redaction::loggable_segment);
        let job_id = recorded_job.or(job_in_path.as_deref());
        span.record("genjobs.job_id", job_id);
        span.record("http.response.status_code", status);
        // Every text as a `&str`, which the line's writer escapes as it is, rather than through
        // `Display` and the formatting machinery.
        tracing::info!(
            request_id = id.to_str().unwrap_or_default(),
            user_id,
            job_id,
            method = method.as_str(),
            path = path.as_ref(),
            status,
            millis = started.elapsed().as_millis() as u64,
            "request"
        );
    }
    response.headers_mut().insert(HeaderName::from_static(REQUEST_ID), id);
    Ok(response)
}

/// `id` as the ids' `Display` writes it, in `buffer` (one of `Uuid::encode_buffer`).
fn id_text(id: Option<uuid::Uuid>, buffer: &mut [u8]) -> Option<&str> {
    Some(id?.hyphenated().encode_lower(buffer))
}
