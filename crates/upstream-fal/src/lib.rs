//! # genjobs-upstream-fal
//!
//! The upstream port over fal's queue API: submit to `{base}/{endpoint_id}`, then use the URLs
//! fal returns for status (`?logs=1`), result and cancel. One reqwest client (one connection
//! pool) serves the whole process, and a semaphore bounds the requests in flight.
//!
//! Failures are classified, not retried here: the job driver backs off and polls again, and it
//! never resubmits after an ambiguous failure, so that a job never runs (or is paid for) twice
//! upstream. What reaches a job's error is the provider's `detail` at most, never the key, a URL
//! or an internal error text.

mod outputs;

use std::time::Duration;

use async_trait::async_trait;
use genjobs_domain::catalog::UpstreamInput;
use genjobs_domain::ids::JobId;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::output::OutputItem;
use genjobs_domain::ports::{PollFailure, ResultFailure, SubmitFailure, UpstreamProvider, UpstreamStatus};
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Semaphore;

pub use outputs::parse_outputs;

/// Where fal is and how to talk to it.
#[derive(Debug, Clone)]
pub struct FalConfig {
    /// Queue base URL, e.g. `https://queue.fal.run`.
    pub base_url: String,
    /// Sent as `Authorization: Key <key>`.
    pub key: Option<String>,
    /// Timeout of one call.
    pub request_timeout: Duration,
    /// Most calls in flight at once.
    pub max_in_flight: usize,
}

impl FalConfig {
    /// Defaults for a base URL: 15 s per call (below the driver's 20 s lease), 64 calls in flight.
    #[must_use]
    pub fn new(base_url: impl Into<String>, key: Option<String>) -> Self {
        Self { base_url: base_url.into(), key, request_timeout: Duration::from_secs(15), max_in_flight: 64 }
    }
}

/// The fal adapter.
#[derive(Debug)]
pub struct FalUpstream {
    client: Client,
    config: FalConfig,
    in_flight: Semaphore,
}

/// A client that cannot be built (a TLS backend that fails to initialise).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct BuildError(#[from] reqwest::Error);

/// Longest provider `detail` kept in a job's error message.
const MAX_DETAIL_CHARS: usize = 300;

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
    #[serde(default)]
    logs: Option<Vec<LogLine>>,
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
        Ok(Self { client, config, in_flight })
    }

    fn authorized(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.config.key {
            Some(key) => request.header("authorization", format!("Key {key}")),
            None => request,
        }
    }

    async fn send(&self, request: RequestBuilder) -> Result<Response, reqwest::Error> {
        // A closed semaphore never happens (it is never closed); proceed without a permit if so.
        let _permit = self.in_flight.acquire().await.ok();
        self.authorized(request).send().await
    }
}

/// The provider's `detail`, shortened: a string, or the `msg` of each item of a list.
async fn detail(response: Response) -> String {
    let status = response.status();
    let body: Option<Value> = response.json().await.ok();
    let text = match body.as_ref().and_then(|b| b.get("detail")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            items.iter().filter_map(|i| i.get("msg").and_then(Value::as_str)).collect::<Vec<_>>().join("; ")
        }
        _ => String::new(),
    };
    if text.is_empty() { format!("HTTP {}", status.as_u16()) } else { text.chars().take(MAX_DETAIL_CHARS).collect() }
}

fn has_detail(body: &Option<Value>) -> bool {
    body.as_ref().and_then(|b| b.get("detail")).is_some()
}

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
    async fn submit(&self, job_id: JobId, input: &UpstreamInput) -> Result<UpstreamRef, SubmitFailure> {
        let url = format!("{}/{}", self.config.base_url.trim_end_matches('/'), input.endpoint);
        let response = match self.send(self.client.post(&url).json(&input.body)).await {
            Ok(r) => r,
            Err(e) if e.is_connect() => {
                return Err(SubmitFailure::NotReached("the provider could not be reached".into()));
            }
            Err(e) if e.is_timeout() => {
                return Err(SubmitFailure::Ambiguous("the provider did not answer in time".into()));
            }
            Err(_) => {
                return Err(SubmitFailure::Ambiguous("the connection to the provider failed".into()));
            }
        };
        let status = response.status();
        tracing::debug!(job_id = %job_id, endpoint = %input.endpoint, status = status.as_u16(), "fal submit");
        if status.is_success() {
            return response
                .json::<SubmitAnswer>()
                .await
                .map(|a| UpstreamRef {
                    request_id: a.request_id,
                    status_url: a.status_url,
                    response_url: a.response_url,
                    cancel_url: a.cancel_url,
                })
                .map_err(|_| SubmitFailure::Ambiguous("the provider's answer could not be read".into()));
        }
        match status {
            StatusCode::TOO_MANY_REQUESTS => Err(SubmitFailure::NotReached("the provider is rate limiting".into())),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                Err(SubmitFailure::Ambiguous("the provider refused the gateway's credentials".into()))
            }
            s if s.is_client_error() => Err(SubmitFailure::Rejected(detail(response).await)),
            _ => Err(SubmitFailure::Ambiguous(format!("the provider answered HTTP {}", status.as_u16()))),
        }
    }

    async fn status(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<UpstreamStatus, PollFailure> {
        let separator = if upstream.status_url.contains('?') { '&' } else { '?' };
        let request = self.client.get(format!("{}{separator}logs=1", upstream.status_url));
        let response = self.send(request).await.map_err(|e| {
            PollFailure::Transient(if e.is_timeout() { "status call timed out" } else { "status call failed" }.into())
        })?;
        let status = response.status();
        tracing::debug!(job_id = %job_id, request_id = %upstream.request_id, status = status.as_u16(), "fal status");
        if transient_status(status) {
            return Err(PollFailure::Transient(format!("status call answered HTTP {}", status.as_u16())));
        }
        if !status.is_success() {
            return Err(PollFailure::Gone(detail(response).await));
        }
        let answer: StatusAnswer =
            response.json().await.map_err(|_| PollFailure::Transient("status answer could not be read".into()))?;
        match answer.status.as_str() {
            "IN_QUEUE" => Ok(UpstreamStatus::Queued),
            "IN_PROGRESS" => {
                Ok(UpstreamStatus::Running { percent: percent_from_logs(answer.logs.as_deref().unwrap_or_default()) })
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
    ) -> Result<Vec<OutputItem>, ResultFailure> {
        let response = self
            .send(self.client.get(&upstream.response_url))
            .await
            .map_err(|_| ResultFailure::Transient("result call failed".into()))?;
        let status = response.status();
        tracing::debug!(job_id = %job_id, request_id = %upstream.request_id, status = status.as_u16(), "fal result");
        if status.is_success() {
            let body: Value =
                response.json().await.map_err(|_| ResultFailure::Invalid("the result is not JSON".into()))?;
            return parse_outputs(&body, modality).map_err(ResultFailure::Invalid);
        }
        match status {
            StatusCode::UNPROCESSABLE_ENTITY => Err(ResultFailure::Rejected(detail(response).await)),
            StatusCode::NOT_FOUND | StatusCode::GONE => {
                Err(ResultFailure::Failed("the result is no longer available at the provider".into()))
            }
            s if s.is_server_error() => {
                let body: Option<Value> = response.json().await.ok();
                if has_detail(&body) {
                    let text = body.as_ref().and_then(|b| b["detail"].as_str()).unwrap_or("the model failed");
                    Err(ResultFailure::Failed(text.chars().take(MAX_DETAIL_CHARS).collect()))
                } else {
                    Err(ResultFailure::Transient(format!("result call answered HTTP {}", s.as_u16())))
                }
            }
            s if transient_status(s) => {
                Err(ResultFailure::Transient(format!("result call answered HTTP {}", s.as_u16())))
            }
            _ => Err(ResultFailure::Failed(detail(response).await)),
        }
    }

    async fn cancel(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<(), PollFailure> {
        let response = self
            .send(self.client.put(&upstream.cancel_url))
            .await
            .map_err(|_| PollFailure::Transient("cancel call failed".into()))?;
        tracing::debug!(job_id = %job_id, request_id = %upstream.request_id, status = response.status().as_u16(), "fal cancel");
        match response.status() {
            s if s.is_success() => Ok(()),
            s if transient_status(s) => Err(PollFailure::Transient(format!("cancel answered HTTP {}", s.as_u16()))),
            _ => Err(PollFailure::Gone(detail(response).await)),
        }
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
