//! # genjobs-upstream-replicate
//!
//! The upstream port over Replicate's HTTP API, for official models, following the operations
//! of Replicate's OpenAPI document (`api.replicate.com/openapi.json`): a job is a prediction
//! created with `models.predictions.create`, `POST {base}/models/{owner}/{name}/predictions`
//! `{"input": …}`, without `Prefer: wait` (created asynchronously, answered `starting`), then
//! read with `predictions.get`, `GET {base}/predictions/{id}`, and canceled with
//! `predictions.cancel`, `POST {base}/predictions/{id}/cancel`. Every call carries
//! `Authorization: Bearer <token>`, as both official clients send it (replicate-python
//! `client.py`, replicate-javascript `index.js`). The job's [`UpstreamRef`] is keyed by the
//! prediction id, which webhooks name. Replicate deletes a prediction's output an hour after it
//! ends, so a result must be read (and copied) within that hour.
//!
//! Which Replicate model serves a catalog model, and how its fields are named, is the route's
//! data ([`routes`]), checked against the model schemas the adapter holds ([`schema`],
//! `replicate-models.json`), which the simulator (`genjobs-upstream-replicate-sim`) enforces.
//!
//! Every failure is classified for the port. A creation answered 429, 502 or 503, or a
//! connection refused, provably created nothing ([`SubmitFailure::NotReached`]): routing may try
//! another provider. A 500, a 504, a cut connection or a timeout once the body was sent may have
//! created a prediction ([`SubmitFailure::Ambiguous`]): it is never sent again anywhere. Other
//! 4xx (an unknown model, a 422 with `invalid_fields`) refuse the job ([`SubmitFailure::Rejected`])
//! with the problem's own words. What reaches a job's error never holds the token or a URL.
//! Webhooks are verified by the Standard Webhooks scheme ([`WebhookConfig`]).

mod args;
mod errors;
mod notifications;
mod prediction;
pub mod routes;
pub mod schema;

use std::time::Duration;

use async_trait::async_trait;
use genjobs_domain::capacity::ProviderKey;
use genjobs_domain::catalog::Model;
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::output::OutputKind;
use genjobs_domain::ports::{
    CancelOutcome, Delivery, NotificationRejected, PollFailure, ResultFailure, SendAs, SubmitCall, SubmitFailure,
    UpstreamProvider, UpstreamReport, UpstreamResult, UpstreamStatus,
};
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;

pub use args::ReplicateArgs;
pub use notifications::{InvalidSecret, MAX_SKEW, WEBHOOK_PATH, WebhookConfig};
pub use routes::{PROVIDER, ReplicateSchemas};

use errors::Problem;
use notifications::Verifier;
use prediction::{Phase, Prediction};
use routes::{ReplicateRoute, RouteError};

/// Replicate's API, as `GENJOBS_REPLICATE_URL` defaults to.
pub const DEFAULT_BASE_URL: &str = "https://api.replicate.com/v1";

/// Where Replicate is and how to talk to it.
#[derive(Debug, Clone)]
pub struct ReplicateConfig {
    /// The API's base URL, `https://api.replicate.com/v1` ([`DEFAULT_BASE_URL`]).
    pub base_url: String,
    /// The account's tokens, each sent as `Authorization: Bearer <token>`; the first when a job
    /// names none.
    pub tokens: Vec<String>,
    /// Most jobs sent with one token and not final; 0 means no cap.
    pub jobs_per_token: u32,
    /// Where Replicate delivers the end of each prediction, and the secret that signs it;
    /// `None` means no webhooks (the driver polls every job).
    pub webhook: Option<WebhookConfig>,
    /// Timeout of one call.
    pub request_timeout: Duration,
    /// Timeout of opening a connection.
    pub connect_timeout: Duration,
    /// Most calls in flight at once.
    pub max_in_flight: usize,
}

impl ReplicateConfig {
    /// Defaults for a base URL and a token: 15 s per call (below the driver's 20 s lease), 5 s
    /// to connect, 64 calls in flight, no webhooks.
    #[must_use]
    pub fn new(base_url: impl Into<String>, token: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            tokens: vec![token.into()],
            jobs_per_token: 0,
            webhook: None,
            request_timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(5),
            max_in_flight: 64,
        }
    }
}

/// The adapter cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The HTTP client (a TLS backend that fails to initialise).
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// The webhook secret.
    #[error(transparent)]
    Secret(#[from] InvalidSecret),
}

/// The Replicate adapter.
#[derive(Debug)]
pub struct ReplicateUpstream {
    client: Client,
    config: ReplicateConfig,
    /// Each token with the name jobs record of it, in the operator's order.
    tokens: Vec<(ProviderKey, String)>,
    in_flight: Semaphore,
    webhooks: Option<Verifier>,
}

/// The detail of a job's reference that names the token it was created with
/// ([`ProviderKey::id`]).
pub const KEY_DETAIL: &str = "key";

impl ReplicateUpstream {
    /// An adapter with its own connection pool.
    ///
    /// # Errors
    /// [`BuildError`] when the HTTP client cannot be built or the webhook secret is not
    /// `whsec_<base64>`.
    pub fn new(config: ReplicateConfig) -> Result<Self, BuildError> {
        let client = Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout.min(config.request_timeout))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()?;
        let webhooks = config.webhook.as_ref().map(Verifier::new).transpose()?;
        let in_flight = Semaphore::new(config.max_in_flight.max(1));
        let tokens =
            config.tokens.iter().map(|token| (ProviderKey::of(token, config.jobs_per_token), token.clone())).collect();
        Ok(Self { client, config, tokens, in_flight, webhooks })
    }

    /// The token named `key_id`; the first for a job that names none or one no longer configured.
    fn token(&self, key_id: Option<&str>) -> &str {
        self.token_of(key_id).map_or("", |(_, token)| token.as_str())
    }

    /// The token `key_id` names, else the first.
    fn token_of(&self, key_id: Option<&str>) -> Option<&(ProviderKey, String)> {
        let named = key_id.and_then(|id| self.tokens.iter().find(|(key, _)| key.id == id));
        named.or_else(|| self.tokens.first())
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.config.base_url.trim_end_matches('/'))
    }

    async fn send(&self, request: RequestBuilder, key_id: Option<&str>) -> Result<Response, reqwest::Error> {
        // The semaphore is never closed; proceed without a permit if it were.
        let _permit = self.in_flight.acquire().await.ok();
        request.bearer_auth(self.token(key_id)).send().await
    }

    /// `GET /predictions/{id}`, classified as a poll.
    async fn prediction(&self, upstream: &UpstreamRef) -> Result<Prediction, PollFailure> {
        let id = prediction_id(upstream).map_err(PollFailure::Gone)?;
        let response = self
            .send(self.client.get(self.url(&format!("predictions/{id}"))), upstream.detail(KEY_DETAIL))
            .await
            .map_err(|e| PollFailure::Transient(transport("prediction read", &e)))?;
        read_prediction(response).await
    }

    /// Creates the prediction with the token named `key_id` (the first when `None`), and records
    /// it in the job's reference.
    async fn create(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
        key_id: Option<&str>,
    ) -> Result<UpstreamRef, SubmitFailure> {
        let request = ReplicateRoute::of(model).and_then(|route| route.request(model, input)).map_err(|e| match e {
            // Nothing was sent: another route of the model may make them all.
            RouteError::OneOutput { .. } => SubmitFailure::NotReached(e.to_string()),
            other => SubmitFailure::Rejected(other.to_string()),
        })?;
        let url = self.url(&format!("models/{}/predictions", request.model));
        let body = creation_body(request.input, self.webhooks.as_ref().map(Verifier::url));
        let response = match self.send(self.client.post(url).json(&body), key_id).await {
            Ok(response) => response,
            Err(e) => return Err(SubmitCall::unanswered_by(e.is_connect(), e.is_timeout()).unanswered()),
        };
        let status = response.status();
        tracing::debug!(job_id = %job_id, model = %request.model, status = status.as_u16(), "replicate create");
        if status.is_success() {
            let prediction: Prediction = response
                .json()
                .await
                .map_err(|_| SubmitFailure::Ambiguous("the provider's answer could not be read".into()))?;
            tracing::info!(job_id = %job_id, prediction = %prediction.id, model = %request.model, "replicate created the prediction");
            let upstream = UpstreamRef::new(PROVIDER, prediction.id).with_detail("model", request.model);
            return Ok(match key_id {
                Some(key_id) => upstream.with_detail(KEY_DETAIL, key_id),
                None => upstream,
            });
        }
        let problem = Problem::read(response).await;
        let call = SubmitCall::Answered(status.as_u16());
        if call.never_reached() {
            let wait = problem.retry_after.map(|s| format!(", retry after {s} s")).unwrap_or_default();
            return Err(call.failure(format!("the provider refused the request: {}{wait}", problem.message())));
        }
        match status {
            // A wrong or revoked token: nothing was created, and another provider may serve.
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(SubmitFailure::NotReached(format!(
                "the provider refused the gateway's credentials (HTTP {})",
                status.as_u16()
            ))),
            s if s.is_client_error() => Err(SubmitFailure::Rejected(problem.message())),
            _ => Err(SubmitFailure::Ambiguous(format!("the provider answered {}", problem.message()))),
        }
    }
}

/// The prediction id of a reference this adapter wrote.
fn prediction_id(upstream: &UpstreamRef) -> Result<&str, String> {
    if upstream.provider() == PROVIDER {
        Ok(upstream.key())
    } else {
        Err(format!("the job's provider reference is {}'s, not replicate's", upstream.provider()))
    }
}

fn transport(what: &str, error: &reqwest::Error) -> String {
    if error.is_timeout() { format!("{what} timed out") } else { format!("{what} failed") }
}

/// A status that says "later" to a read: throttled, timed out or a server error.
fn later(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::REQUEST_TIMEOUT || status.is_server_error()
}

/// An answer carrying a prediction (a get, or a cancel), classified as a poll.
async fn read_prediction(response: Response) -> Result<Prediction, PollFailure> {
    let status = response.status();
    if later(status) {
        return Err(PollFailure::Transient(Problem::read(response).await.message()));
    }
    if !status.is_success() {
        return Err(PollFailure::Gone(Problem::read(response).await.message()));
    }
    response.json().await.map_err(|_| PollFailure::Transient("the prediction could not be read".into()))
}

fn output_kind(modality: Modality) -> Option<OutputKind> {
    match modality {
        Modality::Image => Some(OutputKind::Image),
        Modality::Video => Some(OutputKind::Video),
        _ => None,
    }
}

/// The creation body: the input, and the webhook for completed predictions only when one is
/// configured (the OpenAPI document's `webhook` and `webhook_events_filter`).
fn creation_body(input: Map<String, Value>, webhook: Option<&str>) -> Value {
    match webhook {
        Some(url) => json!({"input": input, "webhook": url, "webhook_events_filter": ["completed"]}),
        None => json!({"input": input}),
    }
}

#[async_trait]
impl UpstreamProvider for ReplicateUpstream {
    fn name(&self) -> &'static str {
        PROVIDER
    }

    fn refused_extra_key(&self, model: &Model, extra: &Map<String, Value>) -> Option<String> {
        routes::refused_extra_key(model, extra).map(str::to_owned)
    }

    async fn submit(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
    ) -> Result<UpstreamRef, SubmitFailure> {
        self.create(job_id, model, input, None).await
    }

    /// Several tokens, or a cap, make each job take a slot of one token; one token with no cap
    /// needs none.
    fn keys(&self) -> Vec<ProviderKey> {
        if self.tokens.len() > 1 || self.config.jobs_per_token > 0 {
            self.tokens.iter().map(|(key, _)| key.clone()).collect()
        } else {
            Vec::new()
        }
    }

    fn key_hint(&self, upstream: &UpstreamRef) -> Option<String> {
        self.token_of(upstream.detail(KEY_DETAIL)).map(|(key, _)| key.hint.clone())
    }

    /// Replicate has no queue priority: only the token counts.
    async fn submit_as(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
        send: &SendAs,
    ) -> Result<UpstreamRef, SubmitFailure> {
        self.create(job_id, model, input, send.key_id.as_deref()).await
    }

    async fn status(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<UpstreamStatus, PollFailure> {
        let prediction = self.prediction(upstream).await?;
        tracing::debug!(job_id = %job_id, prediction = %prediction.id, status = %prediction.status, "replicate status");
        match prediction.phase().map_err(PollFailure::Transient)? {
            Phase::Running(status) => Ok(status),
            Phase::Succeeded => Ok(UpstreamStatus::Completed),
            Phase::Ended(failure) => Ok(UpstreamStatus::Failed(failure)),
        }
    }

    async fn result(
        &self,
        job_id: JobId,
        upstream: &UpstreamRef,
        modality: Modality,
    ) -> Result<UpstreamResult, ResultFailure> {
        let prediction = self.prediction(upstream).await.map_err(|failure| match failure {
            PollFailure::Transient(reason) => ResultFailure::Transient(reason),
            PollFailure::Gone(reason) => ResultFailure::Failed(reason),
        })?;
        tracing::debug!(job_id = %job_id, prediction = %prediction.id, status = %prediction.status, "replicate result");
        match prediction.phase().map_err(ResultFailure::Invalid)? {
            Phase::Succeeded if prediction.data_removed => Err(ResultFailure::Failed(prediction::EXPIRED.into())),
            Phase::Succeeded => prediction.result(output_kind(modality)).map_err(ResultFailure::Invalid),
            Phase::Ended(failure) => Err(failure),
            Phase::Running(_) => Err(ResultFailure::Transient("the prediction has not ended yet".into())),
        }
    }

    async fn cancel(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<(), PollFailure> {
        self.cancel_unless_done(job_id, upstream).await.map(|_| ())
    }

    /// `predictions.cancel` answers with the prediction (replicate-python's `cancel` reads it):
    /// `canceled`, or `succeeded` when it had completed first, whose output can still be read. A
    /// success without a readable prediction is taken as requested: the OpenAPI document
    /// describes no body for it.
    async fn cancel_unless_done(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<CancelOutcome, PollFailure> {
        let id = prediction_id(upstream).map_err(PollFailure::Gone)?;
        let response = self
            .send(self.client.post(self.url(&format!("predictions/{id}/cancel"))), upstream.detail(KEY_DETAIL))
            .await
            .map_err(|e| PollFailure::Transient(transport("cancel", &e)))?;
        let status = response.status();
        let prediction = match read_prediction(response).await {
            Ok(prediction) => Some(prediction),
            Err(PollFailure::Transient(_)) if status.is_success() => None,
            Err(failure) => return Err(failure),
        };
        tracing::debug!(job_id = %job_id, prediction = %id, status = prediction.as_ref().map(|p| p.status.as_str()), "replicate cancel");
        let succeeded = prediction.is_some_and(|p| p.status == "succeeded");
        Ok(if succeeded { CancelOutcome::AlreadyCompleted } else { CancelOutcome::Requested })
    }

    async fn read_notification(
        &self,
        delivery: &Delivery,
        now: time::OffsetDateTime,
    ) -> Result<UpstreamReport, NotificationRejected> {
        self.webhooks.as_ref().ok_or(NotificationRejected::NotEnabled)?.read(delivery, now)
    }
}
