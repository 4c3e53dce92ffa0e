//! fal's error answers: `detail` as a string (request errors) or a list of `{loc, msg, type}`
//! (model errors), `error_type` and the `X-Fal-Error-Type` header, made into a job's message.

use reqwest::{Response, StatusCode};
use serde_json::Value;

use crate::retry::Read;

/// The `detail[].type` (and category) of fal's content policy refusing a request.
const CONTENT_POLICY_VIOLATION: &str = "content_policy_violation";

/// Longest provider `detail` kept in a job's error message.
const MAX_DETAIL_CHARS: usize = 300;

/// An error answer of fal, read once: its status, its `detail` (a string for request errors, a
/// list of `{loc, msg, type}` for model errors) and its category (`error_type` in the body or the
/// `X-Fal-Error-Type` header).
pub(crate) struct FalError {
    pub(crate) status: StatusCode,
    pub(crate) detail: Option<String>,
    pub(crate) error_type: Option<String>,
    /// Whether fal's content policy refused the request: a `detail[].type` of
    /// `content_policy_violation`, or that category.
    pub(crate) content_refused: bool,
}

impl FalError {
    pub(crate) async fn read(response: Response) -> Self {
        let status = response.status();
        let header_type = response.headers().get("x-fal-error-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body: Option<Value> = response.json().await.ok();
        Self::of_body(status, body.as_ref(), header_type)
    }

    /// An error from an answer read to its end.
    pub(crate) fn of_read(read: &Read) -> Self {
        let header_type = read.headers.get("x-fal-error-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body: Option<Value> = serde_json::from_slice(&read.body).ok();
        Self::of_body(read.status, body.as_ref(), header_type)
    }

    /// An error from a body fal sent (an answer's, or a webhook's `payload`).
    pub(crate) fn of_body(status: StatusCode, body: Option<&Value>, error_type: Option<String>) -> Self {
        let detail = body.and_then(|b| b.get("detail")).and_then(describe_detail);
        let error_type = body.and_then(|b| b["error_type"].as_str()).map(str::to_owned).or(error_type);
        let content_refused = body
            .and_then(|b| b.get("detail"))
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(|item| item["type"].as_str() == Some(CONTENT_POLICY_VIOLATION)))
            || error_type.as_deref() == Some(CONTENT_POLICY_VIOLATION);
        Self { status, detail, error_type, content_refused }
    }

    /// An error from a status answer's `error` and `error_type`.
    pub(crate) fn of_status(status: StatusCode, detail: Option<String>, error_type: Option<String>) -> Self {
        let content_refused = error_type.as_deref() == Some(CONTENT_POLICY_VIOLATION);
        Self { status, detail, error_type, content_refused }
    }

    /// For a job's error: the detail and the category, shortened; never a URL or the key.
    pub(crate) fn message(&self) -> String {
        let text = match (&self.detail, &self.error_type) {
            (Some(detail), Some(kind)) => format!("{detail} ({kind})"),
            (Some(detail), None) => detail.clone(),
            (None, Some(kind)) => format!("{kind} (HTTP {})", self.status.as_u16()),
            (None, None) => format!("HTTP {}", self.status.as_u16()),
        };
        text.chars().take(MAX_DETAIL_CHARS).collect()
    }
}

/// `detail` as a sentence: a string as it is, a list as `param: msg` items.
fn describe_detail(detail: &Value) -> Option<String> {
    match detail {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(describe_item).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        _ => None,
    }
}

/// The first validation error of a body's `detail` list (one with a `loc`), as `param: msg`.
pub(crate) fn first_validation_error(body: Option<&Value>) -> Option<String> {
    body?.get("detail")?.as_array()?.iter().filter(|item| item.get("loc").is_some()).find_map(describe_item)
}

/// One `{loc, msg, type}` item as `param: msg` (the last element of `loc`, unless it is `body`).
fn describe_item(item: &Value) -> Option<String> {
    let msg = item.get("msg").and_then(Value::as_str)?;
    let field = item.get("loc").and_then(Value::as_array).and_then(|loc| loc.last()).map(|f| match f {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    Some(match field {
        Some(field) if field != "body" => format!("{field}: {msg}"),
        _ => msg.to_owned(),
    })
}

/// Whether a failure fal reports is about the input (refused) rather than the run.
pub(crate) fn is_refusal(error_type: Option<&str>) -> bool {
    error_type.is_some_and(|kind| {
        kind == "bad_request"
            || kind.contains("validation")
            || kind.contains("content_policy")
            || kind.contains("invalid")
    })
}
