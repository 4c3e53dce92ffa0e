//! Reading an output from the provider's link: one request to a host on the list
//! ([`OutputHosts`]), its answer classified as the [`CopyFailure`] the domain retries or gives
//! up on. The copier ([`crate::ObjectOutputStore`])
//! streams the answer into the store; [`HttpOutputSource`] streams it to clients that ask for an
//! output's bytes.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use genjobs_domain::ports::{ByteRange, CopyFailure, OpenedFile, OutputSource, RangeRequest, StoreError};
use reqwest::StatusCode;
use reqwest::redirect::{Attempt, Policy};

use crate::hosts::{OutputHosts, PublicResolver};

/// Redirects followed at most, each to a host on the list.
const MAX_REDIRECTS: usize = 5;

/// The client that reads outputs from `hosts`: a provider that does not answer within these
/// timeouts is retried later; names resolve through a [`PublicResolver`] trusting the providers' hosts; a redirect off the list
/// is not followed (its 3xx is the answer, and the read fails).
pub(crate) fn client(hosts: &Arc<OutputHosts>) -> reqwest::Result<reqwest::Client> {
    let allowed = Arc::clone(hosts);
    let redirects = Policy::custom(move |attempt: Attempt<'_>| {
        if attempt.previous().len() >= MAX_REDIRECTS || allowed.check(attempt.url().as_str()).is_err() {
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(30))
        .redirect(redirects)
        // A proxy would resolve names itself, past the resolver's check.
        .no_proxy()
        .dns_resolver(Arc::new(PublicResolver::new({
            let hosts = Arc::clone(hosts);
            move |name: &str| hosts.is_provider(name)
        })))
        .build()
}

pub(crate) fn too_large(max: u64) -> CopyFailure {
    CopyFailure::Permanent(format!("the output is larger than the limit of {max} bytes"))
}

/// `GET url` (the part `range` asks for, when given), from a host on the list, answered 2xx
/// with a body that does not announce more than `max_bytes`.
pub(crate) async fn request(
    client: &reqwest::Client,
    hosts: &OutputHosts,
    url: &str,
    range: Option<RangeRequest>,
    max_bytes: u64,
) -> Result<reqwest::Response, CopyFailure> {
    hosts.check(url).map_err(CopyFailure::Permanent)?;
    let mut request = client.get(url);
    if let Some(range) = range {
        request = request.header(reqwest::header::RANGE, range.header_value());
    }
    let response =
        request.send().await.map_err(|e| CopyFailure::Transient(format!("the output could not be fetched: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        let message = format!("the output's URL answered HTTP {}", status.as_u16());
        let transient = status.is_server_error()
            || status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::REQUEST_TIMEOUT;
        return Err(if transient { CopyFailure::Transient(message) } else { CopyFailure::Permanent(message) });
    }
    if response.content_length().is_some_and(|length| length > max_bytes) {
        return Err(too_large(max_bytes));
    }
    Ok(response)
}

/// The `Content-Type` an answer names, if any.
pub(crate) fn content_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// Reads outputs from the provider's links over HTTP, from `hosts` only, as streams.
#[derive(Debug, Clone)]
pub struct HttpOutputSource {
    client: reqwest::Client,
    hosts: Arc<OutputHosts>,
}

impl HttpOutputSource {
    /// A source reading from `hosts`, with its own HTTP client.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(hosts: OutputHosts) -> Result<Self, reqwest::Error> {
        let hosts = Arc::new(hosts);
        Ok(Self { client: client(&hosts)?, hosts })
    }
}

#[async_trait]
impl OutputSource for HttpOutputSource {
    async fn open(&self, url: &str, range: Option<RangeRequest>, max_bytes: u64) -> Result<OpenedFile, CopyFailure> {
        let response = request(&self.client, &self.hosts, url, range, max_bytes).await?;
        let content_type = content_type(&response);
        let (size, range) = match served_range(&response) {
            Some((range, size)) => (Some(size), Some(range)),
            None => (response.content_length(), None),
        };
        let mut sent = 0u64;
        let body = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| StoreError::Unavailable(format!("the download broke off: {e}")))?;
            sent += chunk.len() as u64;
            if sent > max_bytes {
                return Err(StoreError::Unavailable(format!(
                    "the output is larger than the limit of {max_bytes} bytes"
                )));
            }
            Ok(chunk)
        });
        Ok(OpenedFile { content_type, size, range, body: body.boxed() })
    }
}

/// The range a 206 answer carries (`Content-Range: bytes first-last/size`) and the whole file's
/// size; `None` for a whole file.
fn served_range(response: &reqwest::Response) -> Option<(ByteRange, u64)> {
    if response.status() != StatusCode::PARTIAL_CONTENT {
        return None;
    }
    let value = response.headers().get(reqwest::header::CONTENT_RANGE)?.to_str().ok()?;
    let (span, size) = value.strip_prefix("bytes ")?.split_once('/')?;
    let (first, last) = span.split_once('-')?;
    let range = ByteRange { first: first.trim().parse().ok()?, last: last.trim().parse().ok()? };
    (range.first <= range.last).then_some((range, size.trim().parse().ok()?))
}
