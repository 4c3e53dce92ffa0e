//! [`OpenAiModeration`]: the moderation port on an OpenAI-compatible moderation API.
//!
//! One call per check: `POST {url}/moderations` with `{model, input: [{type: "text", text},
//! {type: "image_url", image_url: {url}}…]}` and `Authorization: Bearer <key>`. The answer's
//! `results` are read as one: flagged when any result is, under every category any result flags.
//! Image inputs go as the URLs the provider is sent: the links of uploads and edits are public
//! (signed, under `GENJOBS_PUBLIC_URL`) for the provider to fetch, so the moderation service can
//! fetch them too, and a job's check costs no more than its links.
//!
//! Anything but a readable 2xx answer (no connection, a timeout, a 4xx or 5xx, a body that is not
//! a moderation result) is [`ModerationUnavailable`]; the domain decides whether to try again.

mod args;

use std::collections::BTreeSet;
use std::time::Duration;

use async_trait::async_trait;
use genjobs_domain::ids::JobId;
use genjobs_domain::moderation::{ModerationAnswer, ModerationContent};
use genjobs_domain::ports::{ModerationService, ModerationUnavailable};
use reqwest::Client;
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

pub use args::{ModerationArgs, ModerationUrl};

/// An OpenAI-compatible moderation API.
pub struct OpenAiModeration {
    client: Client,
    endpoint: String,
    key: Option<String>,
    model: String,
}

/// The part of an answer read: each result's verdict and its categories.
#[derive(Debug, Deserialize)]
struct Answer {
    results: Vec<Verdict>,
}

#[derive(Debug, Deserialize)]
struct Verdict {
    flagged: bool,
    #[serde(default)]
    categories: serde_json::Map<String, Value>,
}

impl OpenAiModeration {
    /// A client of the API at `url` (its `/moderations` is called), with `key` when set, asking
    /// for `model`, waiting at most `timeout` for an answer.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(url: &Url, key: Option<String>, model: String, timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = Client::builder().timeout(timeout).connect_timeout(timeout.min(Duration::from_secs(5))).build()?;
        let endpoint = format!("{}/moderations", url.as_str().trim_end_matches('/'));
        Ok(Self { client, endpoint, key: key.filter(|k| !k.is_empty()), model })
    }

    /// The client [`ModerationArgs`] describe, `None` when they name no service; `simulator` is
    /// the built-in simulator's base URL, which `sim` stands for.
    ///
    /// # Errors
    /// Why the client cannot be had: `sim` with no simulator running, or an HTTP client that
    /// cannot be built.
    pub fn from_args(args: &ModerationArgs, simulator: Option<&str>) -> Result<Option<Self>, String> {
        let url = match &args.moderation_url {
            None => return Ok(None),
            Some(ModerationUrl::At(url)) => url.clone(),
            Some(ModerationUrl::Simulator) => {
                let base = simulator.ok_or_else(|| {
                    "`sim` needs the built-in simulator, which runs only without GENJOBS_UPSTREAM_URL".to_owned()
                })?;
                Url::parse(base).map_err(|e| format!("the simulator's URL {base:?}: {e}"))?
            }
        };
        let timeout = Duration::from_secs(args.moderation_timeout_secs);
        Self::new(&url, args.moderation_key.clone(), args.moderation_model.clone(), timeout)
            .map(Some)
            .map_err(|e| format!("cannot build the moderation client: {e}"))
    }

    fn body(&self, content: &ModerationContent) -> Value {
        let mut input = vec![json!({"type": "text", "text": content.text})];
        input.extend(content.images.iter().map(|url| json!({"type": "image_url", "image_url": {"url": url}})));
        json!({"model": self.model, "input": input})
    }
}

/// One answer of the service read as a verdict.
fn read_answer(answer: Answer) -> Result<ModerationAnswer, ModerationUnavailable> {
    if answer.results.is_empty() {
        return Err(ModerationUnavailable("the answer holds no result".into()));
    }
    if !answer.results.iter().any(|result| result.flagged) {
        return Ok(ModerationAnswer::Passed);
    }
    let categories: BTreeSet<String> = answer
        .results
        .iter()
        .flat_map(|result| result.categories.iter())
        .filter(|(_, flagged)| flagged.as_bool() == Some(true))
        .map(|(name, _)| name.clone())
        .collect();
    Ok(ModerationAnswer::Flagged { categories: categories.into_iter().collect() })
}

#[async_trait]
impl ModerationService for OpenAiModeration {
    async fn check(
        &self,
        job_id: JobId,
        content: &ModerationContent,
    ) -> Result<ModerationAnswer, ModerationUnavailable> {
        let mut request = self.client.post(&self.endpoint).json(&self.body(content));
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| {
            ModerationUnavailable(match (e.is_connect(), e.is_timeout()) {
                (true, _) => "the moderation service could not be reached".to_owned(),
                (false, true) => "the moderation service did not answer in time".to_owned(),
                (false, false) => "the call to the moderation service failed".to_owned(),
            })
        })?;
        let status = response.status();
        if !status.is_success() {
            return Err(ModerationUnavailable(format!("the moderation service answered HTTP {}", status.as_u16())));
        }
        let answer: Answer =
            response.json().await.map_err(|_| ModerationUnavailable("the answer is not a moderation result".into()))?;
        let verdict = read_answer(answer)?;
        tracing::debug!(%job_id, flagged = matches!(verdict, ModerationAnswer::Flagged { .. }), "moderation answered");
        Ok(verdict)
    }
}

#[cfg(test)]
mod tests;
