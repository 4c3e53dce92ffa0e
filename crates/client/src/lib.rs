//! # genjobs-client
//!
//! A typed async client of the genjobs API over reqwest: submit image and video jobs, read,
//! long-poll, stream and cancel them, upload images to pass as their inputs, list models,
//! read the account and manage the caller's own keys.
//!
//! - Every submission carries an `Idempotency-Key`, generated per call unless given, and is
//!   retried with the same key when the connection breaks or the service answers 5xx: a retried
//!   submission never holds credits twice.
//! - [`Client::wait_final`] chains long-polls until the job is final or a deadline passes.
//! - [`Client::stream`] follows a job's server-sent events and reconnects by itself when the
//!   server closes a connection (each lasts at most a minute, and a draining replica ends its
//!   streams), sending `Last-Event-ID`, until `done` or `error`.
//! - A refusal is an [`Error::Api`] carrying the service's envelope (`type`, `code`, `message`,
//!   `param`) and `Retry-After`.
//!
//! ```no_run
//! use genjobs_client::{Client, ImageRequest};
//!
//! # async fn run() -> Result<(), genjobs_client::Error> {
//! let client = Client::new("http://127.0.0.1:8080", "gj_…")?;
//! let receipt = client.submit_image(&ImageRequest { n: Some(2), ..ImageRequest::new("a lighthouse") }, None).await?;
//! let job = client.wait_final(&receipt.job_id, std::time::Duration::from_secs(120)).await?;
//! for output in job.outputs.unwrap_or_default() {
//!     println!("{}", output.url);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Layout: [`types`] re-exports the JSON shapes, which are the `genjobs-api` crate's (the same
//! types the service reads and writes, so that client and service cannot disagree), and adds the
//! stream's events; `error` holds the [`Error`] enum, `sse` the event-stream parser. `examples/generate.rs` submits, follows the stream and downloads the outputs.

mod error;
mod sse;
pub mod types;

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;
use types::{DataView, ErrorEnvelope};

pub use error::{ApiError, Error};
pub use types::{
    Account, Batch, BatchCounts, BatchItemBody, BatchRequest, BatchResult, BudgetBody, CancelReceipt, EventKind, Field,
    FieldOption, ImageRequest, IssuedKey, Job, JobError, JobEvent, JobPage, JobState, KeyBudgetView, KeyView,
    LedgerEntry, LedgerPage, Model, NewKey, Output, OutputMeta, Quote, Receipt, StreamEvent, Upload, UsageRow,
    VideoRequest, WebhookAttempt, WebhookDelivery, WebhookPayload, WebhookSecret,
};

/// How long an ordinary call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an upload of up to 20 MiB may take.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest long-poll the service grants.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Attempts of a submission whose outcome is unknown (broken connection, 5xx).
const SUBMIT_ATTEMPTS: u32 = 3;
/// Consecutive failed reconnections after which a stream gives up.
const STREAM_RECONNECTS: u32 = 5;

/// A client of one genjobs service, with one API key. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Client {
    /// A client of the service at `base_url` (e.g. `http://127.0.0.1:8080`) calling with
    /// `api_key`.
    ///
    /// # Errors
    /// [`Error::Transport`] when the HTTP client cannot be built.
    pub fn new(base_url: impl Into<String>, api_key: impl Into<String>) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("genjobs-client/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { http, base: base_url.into().trim_end_matches('/').to_owned(), key: api_key.into() })
    }

    /// The service's base URL.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base)).bearer_auth(&self.key)
    }

    async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, Error> {
        let response = checked(request.send().await?).await?;
        let bytes = response.bytes().await?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode(e.to_string()))
    }

    async fn submit<B: Serialize + Sync>(&self, path: &str, body: &B, key: Option<&str>) -> Result<Receipt, Error> {
        let key = key.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        let mut attempt = 1;
        loop {
            let request =
                self.request(Method::POST, path).timeout(CALL_TIMEOUT).header("Idempotency-Key", &key).json(body);
            match self.send(request).await {
                Err(e) if attempt < SUBMIT_ATTEMPTS && e.is_retryable() && e.api().is_none_or(|a| a.status >= 500) => {
                    tokio::time::sleep(Duration::from_millis(200) * 2u32.pow(attempt - 1)).await;
                    attempt += 1;
                }
                answer => return answer,
            }
        }
    }

    /// Submits an image job. `idempotency_key` makes a later retry of the same call safe;
    /// `None` generates one for this call's own retries.
    ///
    /// # Errors
    /// [`Error::Api`] for a refusal: 400 (the `param` at fault), 401, 402, 409, 429; or as
    /// every call.
    pub async fn submit_image(&self, request: &ImageRequest, idempotency_key: Option<&str>) -> Result<Receipt, Error> {
        self.submit("/api/v1/images/generations", request, idempotency_key).await
    }

    /// Submits a video job; see [`Client::submit_image`].
    ///
    /// # Errors
    /// As [`Client::submit_image`].
    pub async fn submit_video(&self, request: &VideoRequest, idempotency_key: Option<&str>) -> Result<Receipt, Error> {
        self.submit("/api/v1/video/generations", request, idempotency_key).await
    }

    /// What submitting `request` as an image job now would hold; nothing is made or held.
    ///
    /// # Errors
    /// [`Error::Api`] 400 (the `param` at fault, as for a submission), 401, 429; or as every
    /// call. Never 402.
    pub async fn quote_image(&self, request: &ImageRequest) -> Result<Quote, Error> {
        self.send(self.request(Method::POST, "/api/v1/images/generations/quote").timeout(CALL_TIMEOUT).json(request))
            .await
    }

    /// What submitting `request` as a video job now would hold; see [`Client::quote_image`].
    ///
    /// # Errors
    /// As [`Client::quote_image`].
    pub async fn quote_video(&self, request: &VideoRequest) -> Result<Quote, Error> {
        self.send(self.request(Method::POST, "/api/v1/video/generations/quote").timeout(CALL_TIMEOUT).json(request))
            .await
    }

    /// Uploads an image (PNG, JPEG, WebP or GIF, at most 20 MiB) and returns the link to the
    /// service's copy, to pass among a request's `image_inputs` before it expires.
    ///
    /// # Errors
    /// [`Error::Api`] 400 for bytes that are not such an image, 413 for a larger one, 503 when
    /// the service keeps no files; or as every call.
    pub async fn upload_image(&self, image: Vec<u8>) -> Result<Upload, Error> {
        let request = self
            .request(Method::POST, "/api/v1/uploads")
            .timeout(UPLOAD_TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(image);
        self.send(request).await
    }

    /// The job now.
    ///
    /// # Errors
    /// [`Error::Api`] 404 for no such job, 403 for another user's.
    pub async fn job(&self, job_id: &str) -> Result<Job, Error> {
        self.send(self.request(Method::GET, &format!("/api/v1/jobs/{job_id}")).timeout(CALL_TIMEOUT)).await
    }

    /// The job once final, or after `wait` (at most 60 s), whichever comes first.
    ///
    /// # Errors
    /// As [`Client::job`].
    pub async fn long_poll(&self, job_id: &str, wait: Duration) -> Result<Job, Error> {
        let secs = wait.min(MAX_WAIT).as_secs();
        let request = self
            .request(Method::GET, &format!("/api/v1/jobs/{job_id}?wait={secs}"))
            .timeout(Duration::from_secs(secs) + CALL_TIMEOUT);
        self.send(request).await
    }

    /// Long-polls until the job is final; retries through transient failures (a broken
    /// connection, 429, 5xx) until `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the job is not final in time; a refusal other than a transient
    /// one as it comes.
    pub async fn wait_final(&self, job_id: &str, timeout: Duration) -> Result<Job, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout(timeout));
            }
            match self.long_poll(job_id, left.max(Duration::from_secs(1))).await {
                Ok(job) if job.state.is_final() => return Ok(job),
                Ok(_) => {}
                Err(e) if e.is_retryable() => {
                    let pause = e.api().and_then(|a| a.retry_after).unwrap_or(Duration::from_millis(500));
                    tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The caller's jobs, newest first: `limit` of them (1 to 100), older than `before`.
    ///
    /// # Errors
    /// As every call.
    pub async fn jobs(&self, limit: u32, before: Option<&str>) -> Result<JobPage, Error> {
        let mut path = format!("/api/v1/jobs?limit={limit}");
        if let Some(before) = before {
            path.push_str(&format!("&before={before}"));
        }
        self.send(self.request(Method::GET, &path).timeout(CALL_TIMEOUT)).await
    }

    /// Where `job` stands among the caller's own jobs that wait for capacity: 1 for the next of
    /// them to go, as a user's own jobs go oldest first; `None` when it does not wait. Counted
    /// from the caller's older jobs (at most [`WAITING_PAGES`] pages of them), since the Job
    /// resource says only that a job waits, not where.
    ///
    /// # Errors
    /// As every call.
    pub async fn waiting_position(&self, job: &Job) -> Result<Option<u32>, Error> {
        if !waits_for_capacity(job) {
            return Ok(None);
        }
        let (mut ahead, mut before) = (0u32, job.id.clone());
        for _ in 0..WAITING_PAGES {
            let page = self.jobs(100, Some(&before)).await?;
            let waiting = page.data.iter().filter(|older| waits_for_capacity(older)).count();
            ahead = ahead.saturating_add(u32::try_from(waiting).unwrap_or(u32::MAX));
            match page.next {
                Some(next) => before = next,
                None => break,
            }
        }
        Ok(Some(ahead.saturating_add(1)))
    }

    /// Cancels the job and releases its credits (a final job stays as it is).
    ///
    /// # Errors
    /// As [`Client::job`].
    pub async fn cancel(&self, job_id: &str) -> Result<CancelReceipt, Error> {
        self.send(self.request(Method::POST, &format!("/api/v1/jobs/{job_id}/cancel")).timeout(CALL_TIMEOUT)).await
    }

    /// The account's webhook signing secret (made on first use).
    ///
    /// # Errors
    /// As every call.
    pub async fn webhook_secret(&self) -> Result<WebhookSecret, Error> {
        self.send(self.request(Method::GET, "/api/v1/account/webhook-secret").timeout(CALL_TIMEOUT)).await
    }

    /// A new webhook signing secret; the old one signs nothing from now on.
    ///
    /// # Errors
    /// As every call.
    pub async fn rotate_webhook_secret(&self) -> Result<WebhookSecret, Error> {
        self.send(self.request(Method::POST, "/api/v1/account/webhook-secret/rotate").timeout(CALL_TIMEOUT)).await
    }

    /// The job's webhook events with their attempts.
    ///
    /// # Errors
    /// As [`Client::job`].
    pub async fn job_webhooks(&self, job_id: &str) -> Result<Vec<WebhookDelivery>, Error> {
        let path = format!("/api/v1/jobs/{job_id}/webhooks");
        let listing: DataView<WebhookDelivery> =
            self.send(self.request(Method::GET, &path).timeout(CALL_TIMEOUT)).await?;
        Ok(listing.data)
    }

    /// Asks for one more delivery of a job's webhook event, with the same id and body.
    ///
    /// # Errors
    /// [`Error::Api`] 404 for no such job or event, 403 for another user's job; or as every call.
    pub async fn redeliver_webhook(&self, job_id: &str, event_id: &str) -> Result<(), Error> {
        let path = format!("/api/v1/jobs/{job_id}/webhooks/{event_id}/redeliver");
        checked(self.request(Method::POST, &path).timeout(CALL_TIMEOUT).send().await?).await?;
        Ok(())
    }

    /// The models, of one modality (`image`, `video`, …) or all.
    ///
    /// # Errors
    /// As every call.
    pub async fn models(&self, modality: Option<&str>) -> Result<Vec<Model>, Error> {
        let path = modality.map_or_else(|| "/api/v1/models".to_owned(), |m| format!("/api/v1/models?modality={m}"));
        let listing: DataView<Model> = self.send(self.request(Method::GET, &path).timeout(CALL_TIMEOUT)).await?;
        Ok(listing.data)
    }

    /// The caller's account.
    ///
    /// # Errors
    /// As every call.
    pub async fn account(&self) -> Result<Account, Error> {
        self.send(self.request(Method::GET, "/api/v1/account").timeout(CALL_TIMEOUT)).await
    }

    /// Issues the caller a key with `settings` (every field optional): no wider than the key
    /// calling. The key itself is in the answer only.
    ///
    /// # Errors
    /// [`Error::Api`] 400 naming the field at fault, 403 `KEY_SCOPE_EXCEEDED` for a key wider
    /// than the one calling; or as every call.
    pub async fn create_key(&self, settings: &NewKey) -> Result<IssuedKey, Error> {
        self.send(self.request(Method::POST, "/api/v1/account/keys").timeout(CALL_TIMEOUT).json(settings)).await
    }

    /// The caller's keys, oldest first, revoked ones too.
    ///
    /// # Errors
    /// As every call.
    pub async fn keys(&self) -> Result<Vec<KeyView>, Error> {
        let listing: DataView<KeyView> =
            self.send(self.request(Method::GET, "/api/v1/account/keys").timeout(CALL_TIMEOUT)).await?;
        Ok(listing.data)
    }

    /// Revokes one of the caller's keys, by its prefix: it stops working at once.
    ///
    /// # Errors
    /// [`Error::Api`] 404 when no key of the caller has that prefix; or as every call.
    pub async fn revoke_key(&self, prefix: &str) -> Result<(), Error> {
        let path = format!("/api/v1/account/keys/{prefix}");
        checked(self.request(Method::DELETE, &path).timeout(CALL_TIMEOUT).send().await?).await?;
        Ok(())
    }

    /// A page of the caller's ledger, newest first: at most `limit` entries before the cursor
    /// `before` (a page's `next`).
    ///
    /// # Errors
    /// [`Error::Api`] 400 for a bad `limit` or cursor; or as every call.
    pub async fn ledger(&self, limit: u32, before: Option<&str>) -> Result<LedgerPage, Error> {
        let mut query = vec![("limit", limit.to_string())];
        query.extend(before.map(|b| ("before", b.to_owned())));
        self.send(self.request(Method::GET, "/api/v1/account/ledger").timeout(CALL_TIMEOUT).query(&query)).await
    }

    /// The caller's usage from `from` to `to` (UTC days `YYYY-MM-DD`, both included; the last
    /// 30 days when absent), grouped by `day` or `model`.
    ///
    /// # Errors
    /// [`Error::Api`] 400 naming a bad date, range or grouping; or as every call.
    pub async fn usage(&self, from: Option<&str>, to: Option<&str>, group_by: &str) -> Result<Vec<UsageRow>, Error> {
        let mut query = vec![("group_by", group_by.to_owned())];
        query.extend(from.map(|f| ("from", f.to_owned())));
        query.extend(to.map(|t| ("to", t.to_owned())));
        let rows: DataView<UsageRow> =
            self.send(self.request(Method::GET, "/api/v1/account/usage").timeout(CALL_TIMEOUT).query(&query)).await?;
        Ok(rows.data)
    }

    /// Submits a batch: every item checked, the whole held at once or nothing. A retry with the
    /// same `idempotency_key` answers the same batch; `None` generates one for this call's own
    /// retries.
    ///
    /// # Errors
    /// [`Error::Api`] 400 (the `param` names the item, e.g. `items[3].body.prompt`), 401, 402,
    /// 409, 413; or as every call.
    pub async fn submit_batch(&self, request: &BatchRequest, idempotency_key: Option<&str>) -> Result<Batch, Error> {
        let key = idempotency_key.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        let request = self
            .request(Method::POST, "/api/v1/batches")
            .timeout(UPLOAD_TIMEOUT)
            .header("Idempotency-Key", &key)
            .json(request);
        self.send(request).await
    }

    /// The batch now, with its counts.
    ///
    /// # Errors
    /// [`Error::Api`] 404 for no such batch, 403 for another user's.
    pub async fn batch(&self, batch_id: &str) -> Result<Batch, Error> {
        self.send(self.request(Method::GET, &format!("/api/v1/batches/{batch_id}")).timeout(CALL_TIMEOUT)).await
    }

    /// The batch's results as they come from the service: one line of NDJSON per final item, in
    /// the batch's order, streamed.
    ///
    /// # Errors
    /// As [`Client::batch`] for the answer; a broken connection is yielded as an error.
    pub async fn batch_results(&self, batch_id: &str) -> Result<BoxStream<'static, Result<Bytes, Error>>, Error> {
        let request = self.request(Method::GET, &format!("/api/v1/batches/{batch_id}/results"));
        let response = checked(request.send().await?).await?;
        Ok(response.bytes_stream().map(|chunk| chunk.map_err(Error::from)).boxed())
    }

    /// Downloads `url` (an output's) into `path`, streaming; returns the bytes written.
    ///
    /// # Errors
    /// [`Error::Api`] when the file is not served, [`Error::Io`] when it cannot be written.
    pub async fn download(&self, url: &str, path: &Path) -> Result<u64, Error> {
        let io = |source| Error::Io { path: path.display().to_string(), source };
        let response = checked(self.http.get(url).send().await?).await?;
        let mut file = tokio::fs::File::create(path).await.map_err(io)?;
        let mut body = response.bytes_stream();
        let mut written = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            file.write_all(&chunk).await.map_err(io)?;
            written += chunk.len() as u64;
        }
        file.flush().await.map_err(io)?;
        Ok(written)
    }

    async fn open_stream(&self, job_id: &str, last_event_id: Option<&str>) -> Result<Response, Error> {
        let mut request =
            self.request(Method::GET, &format!("/api/v1/jobs/{job_id}/stream")).header("Accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        checked(request.send().await?).await
    }

    /// The job's events as they come: `progress` while it runs, then `done` or `error`, after
    /// which the stream ends. When the server closes a connection, the stream reconnects by
    /// itself (after the server's `retry:` hint, with `Last-Event-ID`) and goes on.
    ///
    /// Errors are yielded, not returned: a refusal (404, 403, 401) ends the stream, and so do
    /// five failed reconnections in a row.
    pub fn stream(&self, job_id: &str) -> BoxStream<'static, Result<JobEvent, Error>> {
        let state = StreamState {
            client: self.clone(),
            job_id: job_id.to_owned(),
            last_event_id: None,
            body: None,
            parser: sse::Parser::default(),
            ready: VecDeque::new(),
            retry: Duration::from_secs(1),
            failures: 0,
            ended: false,
        };
        futures_util::stream::unfold(state, StreamState::next).boxed()
    }
}

/// Where a job's event stream stands between two events.
struct StreamState {
    client: Client,
    job_id: String,
    last_event_id: Option<String>,
    body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    parser: sse::Parser,
    ready: VecDeque<JobEvent>,
    retry: Duration,
    failures: u32,
    ended: bool,
}

impl StreamState {
    async fn next(mut self) -> Option<(Result<JobEvent, Error>, Self)> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                self.ended = matches!(event.kind, EventKind::Done | EventKind::Error);
                return Some((Ok(event), self));
            }
            if self.ended {
                return None;
            }
            let Some(body) = &mut self.body else {
                match self.client.open_stream(&self.job_id, self.last_event_id.as_deref()).await {
                    Ok(response) => {
                        self.body = Some(response.bytes_stream().boxed());
                        self.parser = sse::Parser::default();
                    }
                    Err(e) if e.is_retryable() && self.failures < STREAM_RECONNECTS => {
                        self.failures += 1;
                        tokio::time::sleep(self.retry * self.failures).await;
                    }
                    Err(e) => {
                        self.ended = true;
                        return Some((Err(e), self));
                    }
                }
                continue;
            };
            match body.next().await {
                Some(Ok(bytes)) => {
                    for block in self.parser.push(&bytes) {
                        if let Some(ms) = block.retry {
                            self.retry = Duration::from_millis(ms);
                        }
                        if let Some(id) = &block.id {
                            self.last_event_id = Some(id.clone());
                        }
                        match block.job_event() {
                            Some(Ok(event)) => {
                                self.failures = 0;
                                self.ready.push_back(event);
                            }
                            Some(Err(e)) => {
                                self.ended = true;
                                return Some((Err(Error::Decode(e.to_string())), self));
                            }
                            None => {}
                        }
                    }
                }
                // The server ended this connection (its lifetime, or a drain): reconnect.
                Some(Err(_)) | None => {
                    self.body = None;
                    tokio::time::sleep(self.retry).await;
                }
            }
        }
    }
}

/// `response` when it is a success; its error envelope otherwise.
async fn checked(response: Response) -> Result<Response, Error> {
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    // A proxy in front of the service may answer without the envelope.
    let Ok(ErrorEnvelope { error }) = response.json::<ErrorEnvelope>().await else {
        return Err(Error::Api(ApiError {
            status,
            kind: "unknown".into(),
            code: format!("HTTP_{status}"),
            message: format!("the service answered {status}"),
            param: None,
            retry_after,
        }));
    };
    Err(Error::Api(ApiError {
        status,
        kind: error.kind,
        code: error.code,
        message: error.message,
        param: error.param,
        retry_after,
    }))
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers.get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok().map(Duration::from_secs)
}

/// How many pages of a caller's older jobs [`Client::waiting_position`] reads at most: a user's
/// waiting jobs beyond the 1,000 before a job are not counted.
pub const WAITING_PAGES: usize = 10;

/// Whether `job` waits, unsent, for a slot of its provider's keys (`meta.waiting_for`).
#[must_use]
pub fn waits_for_capacity(job: &Job) -> bool {
    job.meta.as_ref().and_then(|meta| meta.waiting_for.as_deref()) == Some("capacity")
}
