//! # genjobs-upstream-fal
//!
//! The upstream port over fal's queue API: submit to `{base}/{endpoint_id}`, then use the URLs
//! fal returns for status (`?logs=1`), result and cancel. One reqwest client (one connection
//! pool) serves the whole process, and a semaphore bounds the requests in flight.
//!
//! What fal calls a model is this crate's business alone: a model document's fal route names its
//! endpoints (by resolution, with or without images) with fal's parameter names and value
//! translations, which [`routes`] reads generically and checks when a model is put
//! ([`routes::FalSchemas`]); `fal-endpoints.json` holds each endpoint's input schema and output
//! shape as read from fal's published types ([`schema`]), which the simulator enforces.
//! The job's [`UpstreamRef`] is keyed by fal's request id and keeps the endpoint and the queue
//! URLs as its details ([`FalRef`]), so that a poll reads them without parsing.
//!
//! Reads of a status or a result are tried again in place while fal answers "later" (`retry`);
//! past that, failures are classified, and the job driver backs off and reads again until the
//! job's deadline. A submission is never sent again after an ambiguous failure, so that a job
//! never runs (or is paid for) twice upstream. What reaches a job's error is the provider's `detail` at most, never the key, a URL
//! or an internal error text.
//!
//! [`FalArgs`] are the adapter's flags and variables, which the binary flattens into its own.

mod args;
mod draft;
mod errors;
mod notifications;
mod outputs;
mod reference;
mod result;
mod retry;
pub mod routes;
pub mod schema;

use std::time::Duration;

use async_trait::async_trait;
use genjobs_domain::capacity::{Priority, ProviderKey};
use genjobs_domain::catalog::Model;
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{
    CancelOutcome, Delivery, NotificationRejected, PollFailure, ReportedUsage, ResultFailure, SendAs, SubmitCall,
    SubmitFailure, UpstreamProvider, UpstreamReport, UpstreamResult, UpstreamStatus,
};
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Semaphore;

pub use args::FalArgs;
pub use draft::{draft_document, draft_from_schema};
pub use notifications::{FAL_JWKS_URL, MAX_SKEW, WEBHOOK_PATH, WebhookConfig};
pub use outputs::parse_outputs;
pub use reference::FalRef;
pub use retry::ReadRetry;

use errors::{FalError, is_refusal};
use notifications::Verifier;
use result::{billable_units, result_of};
use retry::{Read, ReadError};

/// Where fal is and how to talk to it.
#[derive(Debug, Clone)]
pub struct FalConfig {
    /// Queue base URL, e.g. `https://queue.fal.run`.
    pub base_url: String,
    /// The account's keys, each sent as `Authorization: Key <key>`; none sends no header.
    pub keys: Vec<String>,
    /// Most jobs sent with one key and not final; 0 means no cap.
    pub jobs_per_key: u32,
    /// Timeout of one call.
    pub request_timeout: Duration,
    /// Most calls in flight at once.
    pub max_in_flight: usize,
    /// Where fal delivers the end of each request, and how deliveries are verified; `None`
    /// means no webhooks (the driver polls every job).
    pub webhooks: Option<WebhookConfig>,
    /// How status and result reads are tried again.
    pub read_retry: ReadRetry,
    /// Sent with each submission as fal's start timeout ([`START_TIMEOUT_HEADER`]); `None`
    /// sends nothing.
    pub start_timeout: Option<Duration>,
}

/// fal's server-side start timeout: fal-js (`libs/client/src/queue.ts`, option `startTimeout`;
/// the header's name in `libs/client/src/headers.ts`) sends it in whole seconds, above one, and
/// fal drops a request that has not started processing within it (queue wait, retries and
/// routing included; it does not limit a run that has started).
pub const START_TIMEOUT_HEADER: &str = "x-fal-request-timeout";

impl FalConfig {
    /// Defaults for a base URL: 15 s per call (below the driver's 20 s lease), 64 calls in flight.
    #[must_use]
    pub fn new(base_url: impl Into<String>, key: Option<String>) -> Self {
        Self {
            base_url: base_url.into(),
            keys: key.into_iter().collect(),
            jobs_per_key: 0,
            request_timeout: Duration::from_secs(15),
            max_in_flight: 64,
            webhooks: None,
            read_retry: ReadRetry::default(),
            start_timeout: None,
        }
    }
}

/// The fal adapter.
#[derive(Debug)]
pub struct FalUpstream {
    client: Client,
    config: FalConfig,
    /// Each key's secret with the name jobs record of it, in the operator's order.
    keys: Vec<(ProviderKey, String)>,
    in_flight: Semaphore,
    webhooks: Option<Verifier>,
    routes: routes::ReadRoutes,
}

/// A client that cannot be built (a TLS backend that fails to initialise).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct BuildError(#[from] reqwest::Error);

#[derive(Deserialize)]
struct SubmitAnswer {
    request_id: String,
    status_url: String,
    response_url: String,
    cancel_url: String,
}

#[derive(Deserialize)]
struct StatusAnswer {
    status: String,
    /// How many requests are ahead, while `IN_QUEUE` (fal's `QueueStatus`).
    #[serde(default)]
    queue_position: Option<u32>,
    #[serde(default)]
    logs: Option<Vec<LogLine>>,
    /// Set on a COMPLETED request that failed.
    #[serde(default)]
    error: Option<String>,
    /// fal's category of that failure.
    #[serde(default)]
    error_type: Option<String>,
}

#[derive(Deserialize)]
struct LogLine {
    #[serde(default)]
    message: String,
}

impl FalUpstream {
    /// An adapter with its own connection pool.
    ///
    /// # Errors
    /// [`BuildError`] when the HTTP client cannot be built.
    pub fn new(config: FalConfig) -> Result<Self, BuildError> {
        let client = Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(Duration::from_secs(5).min(config.request_timeout))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()?;
        let in_flight = Semaphore::new(config.max_in_flight.max(1));
        let webhooks = config.webhooks.clone().map(Verifier::new);
        let keys =
            config.keys.iter().map(|secret| (ProviderKey::of(secret, config.jobs_per_key), secret.clone())).collect();
        Ok(Self { client, config, keys, in_flight, webhooks, routes: routes::ReadRoutes::default() })
    }

    /// The secret of the key named `key_id`; the first key for a job that names none (sent
    /// before keys were recorded) or one no longer configured.
    fn secret(&self, key_id: Option<&str>) -> Option<&str> {
        self.key_of(key_id).map(|(_, secret)| secret.as_str())
    }

    /// The key `key_id` names, else the first.
    fn key_of(&self, key_id: Option<&str>) -> Option<&(ProviderKey, String)> {
        let named = key_id.and_then(|id| self.keys.iter().find(|(key, _)| key.id == id));
        named.or_else(|| self.keys.first())
    }

    fn authorized(&self, request: RequestBuilder, key_id: Option<&str>) -> RequestBuilder {
        match self.secret(key_id) {
            Some(key) => request.header("authorization", format!("Key {key}")),
            None => request,
        }
    }

    /// A status or result read, tried again while fal answers "later" ([`retry`]), with the
    /// key that submitted the job.
    async fn read(&self, what: &str, url: &str, upstream: &UpstreamRef) -> Result<Read, ReadError> {
        let key_id = upstream.detail(KEY_DETAIL);
        self.config.read_retry.read(what, || self.send(self.client.get(url), key_id)).await
    }

    async fn send(&self, request: RequestBuilder, key_id: Option<&str>) -> Result<Response, reqwest::Error> {
        // A closed semaphore never happens (it is never closed); proceed without a permit if so.
        let _permit = self.in_flight.acquire().await.ok();
        self.authorized(request, key_id).send().await
    }

    /// Submits with the key `send` names (the first when none), recorded in the job's reference,
    /// and asks fal to queue a low-priority job after its normal requests.
    async fn submit_with(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
        send: &SendAs,
    ) -> Result<UpstreamRef, SubmitFailure> {
        let key_id = send.key_id.as_deref();
        let request = self.routes.request(model, input).map_err(|e| SubmitFailure::Rejected(e.to_string()))?;
        let url = format!("{}/{}", self.config.base_url.trim_end_matches('/'), request.endpoint);
        let mut post = self.client.post(&url).json(&request.body);
        if let Some(seconds) = self.config.start_timeout.map(|t| t.as_secs()).filter(|s| *s > 1) {
            post = post.header(START_TIMEOUT_HEADER, seconds.to_string());
        }
        if let Some(webhooks) = &self.webhooks {
            post = post.query(&[("fal_webhook", webhooks.config().url.as_str())]);
        }
        if send.priority == Priority::Low {
            post = post.header(PRIORITY_HEADER, "low");
        }
        let response = match self.send(post, key_id).await {
            Ok(r) => r,
            Err(e) => return Err(SubmitCall::unanswered_by(e.is_connect(), e.is_timeout()).unanswered()),
        };
        let status = response.status();
        tracing::debug!(job_id = %job_id, endpoint = %request.endpoint, status = status.as_u16(), "fal submit");
        if status.is_success() {
            let answer: SubmitAnswer = response
                .json()
                .await
                .map_err(|_| SubmitFailure::Ambiguous("the provider's answer could not be read".into()))?;
            tracing::info!(job_id = %job_id, request_id = %answer.request_id, endpoint = %request.endpoint, "fal accepted the job");
            let fal = FalRef {
                endpoint: request.endpoint,
                request_id: answer.request_id,
                status_url: answer.status_url,
                response_url: answer.response_url,
                cancel_url: answer.cancel_url,
            };
            let upstream = fal.to_upstream();
            return Ok(match key_id {
                Some(key_id) => upstream.with_detail(KEY_DETAIL, key_id),
                None => upstream,
            });
        }
        let call = SubmitCall::Answered(status.as_u16());
        match status {
            StatusCode::TOO_MANY_REQUESTS => Err(call.failure("the provider is rate limiting")),
            // fal's queue answers a queued request with its request id, and a gateway error or an
            // unavailable queue carries none: the domain's rule counts them as never reached.
            _ if call.never_reached() => Err(call.failure(format!(
                "the provider's queue answered HTTP {} without queuing the request",
                status.as_u16()
            ))),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(SubmitFailure::Ambiguous("the provider refused the gateway's credentials".into()))
            }
            s if s.is_client_error() => {
                let error = FalError::read(response).await;
                Err(match error.content_refused {
                    true => SubmitFailure::ContentRefused(error.message()),
                    false => SubmitFailure::Rejected(error.message()),
                })
            }
            _ => Err(SubmitFailure::Ambiguous(format!("the provider answered HTTP {}", status.as_u16()))),
        }
    }
}

/// fal's queue priority (`X-Fal-Queue-Priority`): `low` requests run after the account's normal
/// ones; normal requests carry no header.
pub const PRIORITY_HEADER: &str = "x-fal-queue-priority";

/// The header of fal's result response that says how many units fal bills for the request.
pub const BILLABLE_UNITS_HEADER: &str = "x-fal-billable-units";

/// The detail of a job's reference that names the key it was submitted with
/// ([`ProviderKey::id`]).
pub const KEY_DETAIL: &str = "key";

fn transient_status(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::REQUEST_TIMEOUT || status.is_server_error()
}

/// A percentage from the newest log line that has one (`progress: 42%`).
fn percent_from_logs(logs: &[LogLine]) -> Option<u8> {
    logs.iter().rev().find_map(|line| {
        let before = line.message.split('%').next().filter(|_| line.message.contains('%'))?;
        let digits: String = before.chars().rev().take_while(char::is_ascii_digit).collect();
        let value: u32 = digits.chars().rev().collect::<String>().parse().ok()?;
        u8::try_from(value.min(100)).ok()
    })
}

#[async_trait]
impl UpstreamProvider for FalUpstream {
    fn name(&self) -> &'static str {
        "fal"
    }

    fn refused_extra_key(&self, model: &Model, extra: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
        self.routes.refused_extra_key(model, extra).map(str::to_owned)
    }

    async fn submit(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
    ) -> Result<UpstreamRef, SubmitFailure> {
        self.submit_with(job_id, model, input, &SendAs::default()).await
    }

    /// Several keys, or a cap, make each job take a slot of one key; one key with no cap needs none.
    fn keys(&self) -> Vec<ProviderKey> {
        if self.keys.len() > 1 || self.config.jobs_per_key > 0 {
            self.keys.iter().map(|(key, _)| key.clone()).collect()
        } else {
            Vec::new()
        }
    }

    fn key_hint(&self, upstream: &UpstreamRef) -> Option<String> {
        self.key_of(upstream.detail(KEY_DETAIL)).map(|(key, _)| key.hint.clone())
    }

    async fn submit_as(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
        send: &SendAs,
    ) -> Result<UpstreamRef, SubmitFailure> {
        self.submit_with(job_id, model, input, send).await
    }

    async fn status(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<UpstreamStatus, PollFailure> {
        let fal = FalRef::from_upstream(upstream).map_err(PollFailure::Gone)?;
        let separator = if fal.status_url.contains('?') { '&' } else { '?' };
        let url = format!("{}{separator}logs=1", fal.status_url);
        let read = self.read("status", &url, upstream).await.map_err(|e| {
            PollFailure::Transient(
                match e {
                    ReadError::Timeout => "status call timed out",
                    ReadError::Connection => "status call failed",
                }
                .into(),
            )
        })?;
        let status = read.status;
        tracing::debug!(job_id = %job_id, request_id = %fal.request_id, status = status.as_u16(), "fal status");
        if transient_status(status) {
            return Err(PollFailure::Transient(format!("status call answered HTTP {}", status.as_u16())));
        }
        if !status.is_success() {
            return Err(PollFailure::Gone(FalError::of_read(&read).message()));
        }
        let answer: StatusAnswer = serde_json::from_slice(&read.body)
            .map_err(|_| PollFailure::Transient("status answer could not be read".into()))?;
        match answer.status.as_str() {
            "IN_QUEUE" => Ok(UpstreamStatus::Queued { position: answer.queue_position }),
            "IN_PROGRESS" => {
                Ok(UpstreamStatus::Running { percent: percent_from_logs(answer.logs.as_deref().unwrap_or_default()) })
            }
            "COMPLETED" if answer.error.is_some() || answer.error_type.is_some() => {
                let error = FalError::of_status(status, answer.error, answer.error_type);
                let message = error.message();
                Ok(UpstreamStatus::Failed(if error.content_refused {
                    ResultFailure::ContentRefused(message)
                } else if is_refusal(error.error_type.as_deref()) {
                    ResultFailure::Rejected(message)
                } else {
                    ResultFailure::Failed(message)
                }))
            }
            "COMPLETED" => Ok(UpstreamStatus::Completed),
            other => Err(PollFailure::Transient(format!("unknown status {other:?}"))),
        }
    }

    async fn result(
        &self,
        job_id: JobId,
        upstream: &UpstreamRef,
        modality: Modality,
    ) -> Result<UpstreamResult, ResultFailure> {
        let fal = FalRef::from_upstream(upstream).map_err(ResultFailure::Failed)?;
        let read = self.read("result", &fal.response_url, upstream).await.map_err(|e| {
            ResultFailure::Transient(
                match e {
                    ReadError::Timeout => "result call timed out",
                    ReadError::Connection => "result call failed",
                }
                .into(),
            )
        })?;
        let status = read.status;
        tracing::debug!(job_id = %job_id, request_id = %fal.request_id, status = status.as_u16(), "fal result");
        // fal bills a request that ran and failed too, and says so on the failed result's response.
        let usage = ReportedUsage { billable_units: billable_units(&read), compute_seconds: None };
        if usage.billable_units.is_none() && read.headers.contains_key(BILLABLE_UNITS_HEADER) {
            tracing::warn!(job_id = %job_id, request_id = %fal.request_id, "fal's billable units header could not be read");
        }
        result_of(&read, modality, usage).map_err(|failure| failure.billed(usage))
    }

    async fn cancel(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<(), PollFailure> {
        self.cancel_unless_done(job_id, upstream).await.map(|_| ())
    }

    /// fal answers a cancel 202 `{"status": "CANCELLATION_REQUESTED"}`, or 400
    /// `{"status": "ALREADY_COMPLETED"}` when the request has completed (its result can still be
    /// fetched), or 404 `{"status": "NOT_FOUND"}`.
    async fn cancel_unless_done(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<CancelOutcome, PollFailure> {
        let fal = FalRef::from_upstream(upstream).map_err(PollFailure::Gone)?;
        let response = self
            .send(self.client.put(&fal.cancel_url), upstream.detail(KEY_DETAIL))
            .await
            .map_err(|_| PollFailure::Transient("cancel call failed".into()))?;
        let status = response.status();
        tracing::debug!(job_id = %job_id, request_id = %fal.request_id, status = status.as_u16(), "fal cancel");
        match status {
            s if s.is_success() => Ok(CancelOutcome::Requested),
            s if transient_status(s) => Err(PollFailure::Transient(format!("cancel answered HTTP {}", s.as_u16()))),
            StatusCode::BAD_REQUEST => {
                let body: Option<Value> = response.json().await.ok();
                match body.as_ref().and_then(|b| b.get("status")).and_then(Value::as_str) {
                    Some("ALREADY_COMPLETED") => Ok(CancelOutcome::AlreadyCompleted),
                    _ => Err(PollFailure::Gone(FalError::of_body(status, body.as_ref(), None).message())),
                }
            }
            _ => Err(PollFailure::Gone(FalError::read(response).await.message())),
        }
    }

    async fn read_notification(
        &self,
        delivery: &Delivery,
        now: time::OffsetDateTime,
    ) -> Result<UpstreamReport, NotificationRejected> {
        let webhooks = self.webhooks.as_ref().ok_or(NotificationRejected::NotEnabled)?;
        webhooks.read(&self.client, delivery, now).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logs(lines: &[&str]) -> Vec<LogLine> {
        lines.iter().map(|m| LogLine { message: (*m).to_owned() }).collect()
    }

    #[test]
    fn percent_comes_from_the_newest_line_that_has_one() {
        assert_eq!(percent_from_logs(&logs(&["progress: 10%", "step 3", "progress: 42%"])), Some(42));
        assert_eq!(percent_from_logs(&logs(&["40% done", "loading weights"])), Some(40));
        assert_eq!(percent_from_logs(&logs(&["no numbers here"])), None);
        assert_eq!(percent_from_logs(&logs(&["250%"])), Some(100));
    }
}
