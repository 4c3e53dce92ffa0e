//! Reads of a request's status and result, tried again in place while fal (or the network before
//! it) answers what a busy or restarting service answers: 408, 429, 502, 503 or 504 without fal's
//! error category, a refused or dropped connection, a body cut off. Each retry waits an
//! exponential delay with jitter (so that many jobs do not come back at the same instant), or the
//! `Retry-After` fal sent when that is longer, and the retries stop within a budget kept below
//! the driver's lease. What is still transient then goes back to the driver, which backs off and
//! reads again until the job's deadline: only a definite answer fails a job.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// How reads are tried again.
#[derive(Debug, Clone, Copy)]
pub struct ReadRetry {
    /// Delay before the first retry; doubled each time.
    pub first_delay: Duration,
    /// Longest delay of the back-off (a `Retry-After` may ask for more, within the budget).
    pub max_delay: Duration,
    /// Time after which no retry starts; the read answers what it last got.
    pub budget: Duration,
}

impl Default for ReadRetry {
    /// 200 ms doubling to 2 s, for at most 5 s: with the 15 s timeout of one call, a read ends
    /// before the driver's 20 s lease runs out.
    fn default() -> Self {
        Self {
            first_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
            budget: Duration::from_secs(5),
        }
    }
}

/// An answer read to its end.
pub(crate) struct Read {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

/// Why a read got no answer.
pub(crate) enum ReadError {
    /// The call timed out.
    Timeout,
    /// The connection failed, or dropped before the body ended.
    Connection,
}

/// Whether an answer says "later" rather than anything about the request: the statuses a busy
/// or restarting service answers, without fal's error category, in its `X-Fal-Error-Type` header
/// or its body's `error_type` (either makes it fal's verdict on the request).
pub(crate) fn says_later(read: &Read) -> bool {
    let categorized = read.headers.contains_key("x-fal-error-type")
        || serde_json::from_slice::<serde_json::Value>(&read.body)
            .is_ok_and(|body| body.get("error_type").is_some_and(|t| !t.is_null()));
    matches!(read.status.as_u16(), 408 | 429 | 502 | 503 | 504) && !categorized
}

/// `Retry-After` in seconds (fal sends seconds; an HTTP date is left to the back-off).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers.get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

impl ReadRetry {
    /// The delay before retry number `retry` (1 for the first): the back-off, half of it
    /// random, or what the server asked for when longer.
    fn delay(&self, retry: u32, asked: Option<Duration>) -> Duration {
        let backoff = self.first_delay.saturating_mul(1 << retry.saturating_sub(1).min(16)).min(self.max_delay);
        let jitter = RandomState::new().build_hasher().finish() % 1000;
        let jittered = backoff / 2 + backoff / 2 * u32::try_from(jitter).unwrap_or(0) / 1000;
        asked.map_or(jittered, |asked| asked.max(jittered))
    }

    /// Sends the request `send` makes and reads its answer, again while it [`says_later`] or
    /// fails on the way, within the budget. `what` names the read in the logs.
    pub(crate) async fn read<F, Fut>(&self, what: &str, send: F) -> Result<Read, ReadError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<reqwest::Response, reqwest::Error>>,
    {
        let started = Instant::now();
        let mut retry = 0u32;
        loop {
            let outcome = match send().await {
                Ok(response) => {
                    let (status, headers) = (response.status(), response.headers().clone());
                    match response.bytes().await {
                        Ok(body) => Ok(Read { status, headers, body: body.to_vec() }),
                        Err(e) if e.is_timeout() => Err(ReadError::Timeout),
                        Err(_) => Err(ReadError::Connection),
                    }
                }
                Err(e) if e.is_timeout() => Err(ReadError::Timeout),
                Err(_) => Err(ReadError::Connection),
            };
            let asked = match &outcome {
                Ok(read) if says_later(read) => retry_after(&read.headers),
                Ok(_) => return outcome,
                Err(_) => None,
            };
            retry += 1;
            let delay = self.delay(retry, asked);
            if started.elapsed() + delay > self.budget {
                return outcome;
            }
            tracing::debug!(read = what, retry, delay_ms = delay.as_millis() as u64, "fal read to be tried again");
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_with_jitter_and_a_longer_retry_after_wins() {
        let retry = ReadRetry::default();
        for _ in 0..50 {
            let first = retry.delay(1, None);
            assert!((Duration::from_millis(100)..=Duration::from_millis(200)).contains(&first), "{first:?}");
            let third = retry.delay(3, None);
            assert!((Duration::from_millis(400)..=Duration::from_millis(800)).contains(&third), "{third:?}");
            assert!(retry.delay(30, None) <= retry.max_delay);
        }
        assert_eq!(retry.delay(1, Some(Duration::from_secs(3))), Duration::from_secs(3));
    }

    #[test]
    fn only_an_answer_without_fal_s_verdict_says_later() {
        let read = |status: u16, headers: HeaderMap, body: &str| Read {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            body: body.as_bytes().to_vec(),
        };
        for status in [408, 429, 502, 503, 504] {
            assert!(says_later(&read(status, HeaderMap::new(), "")), "{status}");
            assert!(says_later(&read(status, HeaderMap::new(), r#"{"detail": "busy"}"#)), "{status} with a detail");
        }
        for status in [200, 400, 404, 422, 500] {
            assert!(!says_later(&read(status, HeaderMap::new(), "")), "{status}");
        }
        let mut headers = HeaderMap::new();
        headers.insert("x-fal-error-type", "runner_disconnected".parse().unwrap());
        assert!(!says_later(&read(503, headers, "")));
        assert!(!says_later(&read(503, HeaderMap::new(), r#"{"error_type": "request_timeout"}"#)));
    }
}
