//! Errors in OpenAI's shape, `{error: {message, type, param, code}}` with all four keys, at the
//! native API's statuses: a client of OpenAI's API tells "top up" (402) from "slow down" (429) and
//! raises the exception class it raises for OpenAI itself. A 5xx answered after the request's
//! job was accepted carries `x-should-retry: false`: OpenAI's clients retry a 5xx by default,
//! and a retry without an idempotency key would pay for a second job.

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use actix_web::{HttpResponse, ResponseError};
use genjobs_api::openai::ErrorObject;

use crate::error::{ApiError, retry_after_secs};

/// The header OpenAI's clients read before retrying on their own.
const SHOULD_RETRY: &str = "x-should-retry";

/// An error of the OpenAI-compatible edge: a native error, shown in OpenAI's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiError {
    native: ApiError,
    job_accepted: bool,
}

impl<E: Into<ApiError>> From<E> for OpenAiError {
    fn from(e: E) -> Self {
        Self { native: e.into(), job_accepted: false }
    }
}

impl OpenAiError {
    /// The same error, answered after the request's job was accepted.
    #[must_use]
    pub fn after_acceptance(self) -> Self {
        Self { job_accepted: true, ..self }
    }
}

/// OpenAI's error envelope, under the name the handlers' documentation uses.
pub(crate) use genjobs_api::openai::ErrorEnvelope as Envelope;

/// OpenAI's error `type` for a native one, as OpenAI's API names its classes.
fn openai_type(native: &str, status: StatusCode) -> &'static str {
    match native {
        "invalid_request" => "invalid_request_error",
        "unauthorized" => "authentication_error",
        "insufficient_credits" => "insufficient_quota",
        "forbidden" => "permission_error",
        "not_found" => "not_found_error",
        "rate_limited" => "rate_limit_error",
        "idempotency_conflict" => "conflict_error",
        _ if status.is_server_error() => "server_error",
        _ => "invalid_request_error",
    }
}

impl std::fmt::Display for OpenAiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.native.fmt(f)
    }
}

impl ResponseError for OpenAiError {
    fn status_code(&self) -> StatusCode {
        self.native.status_code()
    }

    fn error_response(&self) -> HttpResponse {
        let native = &self.native;
        let status = native.status_code();
        let envelope = Envelope {
            error: ErrorObject {
                message: native.message().to_owned(),
                kind: openai_type(native.kind(), status).to_owned(),
                param: native.param().map(str::to_owned),
                code: native.code().to_ascii_lowercase(),
            },
        };
        let mut response = HttpResponse::build(status);
        response.insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")));
        if let Some(retry_after) = native.retry_after() {
            response.insert_header((RETRY_AFTER, retry_after_secs(retry_after)));
        }
        if self.job_accepted && status.is_server_error() {
            response.insert_header((SHOULD_RETRY, HeaderValue::from_static("false")));
        }
        response.body(serde_json::to_string(&envelope).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use actix_web::body::MessageBody;
    use genjobs_domain::invalid::InvalidRequest;
    use serde_json::{Value, json};

    use super::*;

    fn body(error: &OpenAiError) -> Value {
        let bytes = error.error_response().into_body().try_into_bytes().unwrap_or_default();
        serde_json::from_slice(&bytes).unwrap_or_default()
    }

    #[test]
    fn every_key_is_present_and_null_where_there_is_none() {
        let unknown = OpenAiError::from(InvalidRequest::param("model", "unknown model \"x\""));
        assert_eq!(
            body(&unknown),
            json!({"error": {"message": "unknown model \"x\"", "type": "invalid_request_error", "param": "model", "code": "invalid_request"}})
        );
        let key = OpenAiError::from(ApiError::invalid_key());
        assert_eq!(key.status_code(), StatusCode::UNAUTHORIZED);
        assert_eq!(body(&key)["error"]["param"], Value::Null);
        assert_eq!(body(&key)["error"]["type"], "authentication_error");
    }

    #[test]
    fn a_rate_limit_keeps_its_retry_after() {
        let limited = OpenAiError::from(ApiError::concurrency_limit(
            "at most 1 job".into(),
            std::time::Duration::from_millis(1500),
        ));
        let response = limited.error_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()), Some("2"));
        assert_eq!(body(&limited)["error"]["type"], "rate_limit_error");
    }

    #[test]
    fn a_server_error_after_acceptance_tells_clients_not_to_retry() {
        let failed =
            || OpenAiError::from(ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", "UPSTREAM_FAILED", "no"));
        let header = |e: OpenAiError| e.error_response().headers().get(SHOULD_RETRY).cloned();
        assert_eq!(header(failed().after_acceptance()), Some(HeaderValue::from_static("false")));
        assert_eq!(header(failed()), None, "nothing was accepted: a retry is safe");
        let refused = OpenAiError::from(InvalidRequest::param("model", "no")).after_acceptance();
        assert_eq!(header(refused), None, "a 4xx is not retried anyway");
    }
}
