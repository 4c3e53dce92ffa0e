//! The error envelope `{error: {type, code, message, param?}}` for every status, and the mapping
//! of each use case's error enum onto it.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use actix_web::{HttpResponse, ResponseError};
use genjobs_api::ErrorObject;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::ports::NotificationRejected;
use genjobs_domain::ports::StoreError;
use genjobs_domain::upload::MAX_UPLOAD_BYTES;
use genjobs_domain::usecases::{
    AdminError, AuthError, BatchQueryError, CatalogAdminError, JobQueryError, NotificationError, OpenAiBatchError,
    OutputReadError, OwnKeyError, SubmitError, UploadError, WebhookSecretError,
};

/// An error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    kind: &'static str,
    code: &'static str,
    message: String,
    param: Option<String>,
    retry_after: Option<Duration>,
}

/// The error envelope of every error response, under the name the handlers' documentation uses.
pub(crate) use genjobs_api::ErrorEnvelope as Envelope;

impl ApiError {
    /// An error of `status`, `type` and `code`.
    #[must_use]
    pub fn new(status: StatusCode, kind: &'static str, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, kind, code, message: message.into(), param: None, retry_after: None }
    }

    /// 401 `MISSING_API_KEY`.
    #[must_use]
    pub fn missing_key(message: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "MISSING_API_KEY", message)
    }

    /// 401 `INVALID_API_KEY`.
    #[must_use]
    pub fn invalid_key() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "INVALID_API_KEY", "the API key is not valid")
    }

    /// 401 `INVALID_API_KEY` for `/api/admin` and `/metrics`: the code a client already handles,
    /// with a message that names the operators' token rather than an API key.
    #[must_use]
    pub fn invalid_admin_token() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "INVALID_API_KEY",
            "the admin token is not valid: it is GENJOBS_ADMIN_TOKEN, or the token the first start printed",
        )
    }

    /// 404 `JOB_NOT_FOUND`.
    #[must_use]
    pub fn job_not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", "JOB_NOT_FOUND", "no job with this id")
    }

    /// 404 `ROUTE_NOT_FOUND`.
    #[must_use]
    pub fn route_not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", "ROUTE_NOT_FOUND", "no such route")
    }

    /// 405 `METHOD_NOT_ALLOWED`.
    #[must_use]
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request",
            "METHOD_NOT_ALLOWED",
            "this method is not allowed on this route",
        )
    }

    /// 413 `BODY_TOO_LARGE`.
    #[must_use]
    pub fn body_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request",
            "BODY_TOO_LARGE",
            format!("the body must be at most {limit} bytes"),
        )
    }

    /// 408 `REQUEST_TIMEOUT`: the body did not arrive in time. Its connection is closed, since
    /// what is left of the body would be read as the next request.
    #[must_use]
    pub fn body_timeout() -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "invalid_request", "REQUEST_TIMEOUT", "the body did not arrive in time")
    }

    /// 415 `UNSUPPORTED_MEDIA_TYPE`.
    #[must_use]
    pub fn unsupported_media_type() -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request",
            "UNSUPPORTED_MEDIA_TYPE",
            "the body must be JSON with Content-Type: application/json",
        )
    }

    /// 429 `CONCURRENCY_LIMIT_EXCEEDED`.
    #[must_use]
    pub fn concurrency_limit(message: String, retry_after: Duration) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "CONCURRENCY_LIMIT_EXCEEDED", message)
        }
    }

    /// The error's code, for tests and logs.
    #[must_use]
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The error's `type`.
    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }

    /// The sentence for people.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The field or parameter at fault.
    pub(crate) fn param(&self) -> Option<&str> {
        self.param.as_deref()
    }

    /// The `Retry-After` of a 429.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let envelope = Envelope {
            error: ErrorObject {
                kind: self.kind.to_owned(),
                code: self.code.to_owned(),
                message: self.message.clone(),
                param: self.param.clone(),
            },
        };
        let mut response = HttpResponse::build(self.status);
        response.insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")));
        if self.status == StatusCode::REQUEST_TIMEOUT {
            response.force_close();
        }
        if let Some(retry_after) = self.retry_after {
            response.insert_header((RETRY_AFTER, retry_after_secs(retry_after)));
        }
        response.body(serde_json::to_string(&envelope).unwrap_or_default())
    }
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub(crate) fn retry_after_secs(retry_after: Duration) -> String {
    genjobs_domain::usecases::whole_seconds(retry_after).to_string()
}

impl From<InvalidRequest> for ApiError {
    fn from(e: InvalidRequest) -> Self {
        Self { param: e.param, ..Self::new(StatusCode::BAD_REQUEST, "invalid_request", "INVALID_REQUEST", e.message) }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(detail) => {
                tracing::warn!(%detail, "store unavailable");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "SERVICE_UNAVAILABLE",
                    "the service is temporarily unavailable; try again shortly",
                )
            }
            StoreError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal_error",
                    "INTERNAL",
                    "an unexpected error occurred",
                )
            }
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::InvalidKey => Self::invalid_key(),
            AuthError::KeyExpired(_) => {
                Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "API_KEY_EXPIRED", e.to_string())
            }
            AuthError::RateLimited { retry_after } => Self {
                retry_after: Some(retry_after),
                ..Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "RATE_LIMIT_EXCEEDED", e.to_string())
            },
            AuthError::Store(e) => e.into(),
        }
    }
}

impl From<JobQueryError> for ApiError {
    fn from(e: JobQueryError) -> Self {
        match e {
            JobQueryError::NotFound => Self::job_not_found(),
            JobQueryError::Forbidden => Self::new(StatusCode::FORBIDDEN, "forbidden", "FORBIDDEN", e.to_string()),
            JobQueryError::Store(e) => e.into(),
        }
    }
}

impl From<BatchQueryError> for ApiError {
    fn from(e: BatchQueryError) -> Self {
        match e {
            BatchQueryError::NotFound => {
                Self::new(StatusCode::NOT_FOUND, "not_found", "BATCH_NOT_FOUND", "no such batch")
            }
            BatchQueryError::Forbidden => Self::new(StatusCode::FORBIDDEN, "forbidden", "FORBIDDEN", e.to_string()),
            BatchQueryError::Store(e) => e.into(),
        }
    }
}

impl From<OpenAiBatchError> for ApiError {
    fn from(e: OpenAiBatchError) -> Self {
        match e {
            OpenAiBatchError::Invalid(invalid) => invalid.into(),
            OpenAiBatchError::NotFound("file") => {
                Self::new(StatusCode::NOT_FOUND, "not_found", "FILE_NOT_FOUND", "no such file")
            }
            OpenAiBatchError::NotFound(_) => BatchQueryError::NotFound.into(),
            // A batch's acceptance is never refused for the concurrent-job limit: no wait to advise.
            OpenAiBatchError::Submit(e) => Self::from_submit(e, Duration::ZERO),
            OpenAiBatchError::Store(e) => e.into(),
        }
    }
}

impl ApiError {
    /// Maps a submission error; a concurrency refusal advises retrying after `retry_after`.
    #[must_use]
    pub fn from_submit(e: SubmitError, retry_after: Duration) -> Self {
        match e {
            SubmitError::InsufficientCredits { .. } => {
                Self::new(StatusCode::PAYMENT_REQUIRED, "insufficient_credits", "NOT_ENOUGH_CREDITS", e.to_string())
            }
            SubmitError::KeyBudgetExceeded(_) => {
                Self::new(StatusCode::PAYMENT_REQUIRED, "insufficient_credits", "KEY_BUDGET_EXCEEDED", e.to_string())
            }
            SubmitError::ModelNotAllowed { .. } => Self {
                param: Some("model".to_owned()),
                ..Self::new(StatusCode::FORBIDDEN, "forbidden", "MODEL_NOT_ALLOWED", e.to_string())
            },
            SubmitError::ConcurrencyLimit { .. } | SubmitError::KeyConcurrencyLimit { .. } => {
                Self::concurrency_limit(e.to_string(), retry_after)
            }
            SubmitError::IdempotencyConflict => {
                Self::new(StatusCode::CONFLICT, "idempotency_conflict", "IDEMPOTENCY_KEY_REUSED", e.to_string())
            }
            SubmitError::Invalid(e) => e.into(),
            SubmitError::Store(e) => e.into(),
        }
    }
}

impl From<OwnKeyError> for ApiError {
    fn from(e: OwnKeyError) -> Self {
        match e {
            OwnKeyError::UnknownKey => Self::new(StatusCode::NOT_FOUND, "not_found", "KEY_NOT_FOUND", e.to_string()),
            OwnKeyError::ScopeExceeded { field } => Self {
                param: Some(field.to_owned()),
                ..Self::new(StatusCode::FORBIDDEN, "forbidden", "KEY_SCOPE_EXCEEDED", e.to_string())
            },
            OwnKeyError::Invalid(e) => e.into(),
            OwnKeyError::Store(e) => e.into(),
        }
    }
}

impl From<WebhookSecretError> for ApiError {
    fn from(e: WebhookSecretError) -> Self {
        match e {
            WebhookSecretError::Restricted => {
                Self::new(StatusCode::FORBIDDEN, "forbidden", "KEY_SCOPE_EXCEEDED", e.to_string())
            }
            WebhookSecretError::Store(e) => e.into(),
        }
    }
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::UnknownUser => Self::new(StatusCode::NOT_FOUND, "not_found", "USER_NOT_FOUND", e.to_string()),
            AdminError::UnknownKey => Self::new(StatusCode::NOT_FOUND, "not_found", "KEY_NOT_FOUND", e.to_string()),
            AdminError::Invalid(e) => e.into(),
            AdminError::Store(e) => e.into(),
        }
    }
}

impl From<CatalogAdminError> for ApiError {
    fn from(e: CatalogAdminError) -> Self {
        match e {
            CatalogAdminError::UnknownModel => {
                Self::new(StatusCode::NOT_FOUND, "not_found", "MODEL_NOT_FOUND", e.to_string())
            }
            CatalogAdminError::Invalid(e) => e.into(),
            CatalogAdminError::Store(e) => e.into(),
        }
    }
}

impl From<NotificationError> for ApiError {
    fn from(e: NotificationError) -> Self {
        match e {
            NotificationError::Rejected(NotificationRejected::NotEnabled) => Self::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "WEBHOOKS_NOT_ENABLED",
                "webhooks are off: the service has no GENJOBS_PUBLIC_URL",
            ),
            NotificationError::Rejected(NotificationRejected::InvalidSignature(reason)) => {
                Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "INVALID_SIGNATURE", reason)
            }
            NotificationError::Rejected(NotificationRejected::Malformed(reason)) => InvalidRequest::body(reason).into(),
            NotificationError::Rejected(NotificationRejected::Unavailable(reason)) => {
                StoreError::Unavailable(reason).into()
            }
            NotificationError::UnknownJob => Self::job_not_found(),
            NotificationError::Store(e) => e.into(),
        }
    }
}

impl From<OutputReadError> for ApiError {
    fn from(e: OutputReadError) -> Self {
        match e {
            OutputReadError::NotFound => Self::new(StatusCode::NOT_FOUND, "not_found", "FILE_NOT_FOUND", e.to_string()),
            OutputReadError::RangeNotSatisfiable { .. } => {
                Self::new(StatusCode::RANGE_NOT_SATISFIABLE, "invalid_request", "RANGE_NOT_SATISFIABLE", e.to_string())
            }
            OutputReadError::Store(e) => e.into(),
        }
    }
}

/// The time from `now` to the next midnight UTC.
fn until_next_utc_day(now: time::OffsetDateTime) -> Duration {
    let now = now.to_offset(time::UtcOffset::UTC);
    let midnight = now.date().next_day().map_or(now, |day| day.midnight().assume_utc());
    Duration::try_from(midnight - now).unwrap_or(Duration::ZERO)
}

impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::NotAnImage => InvalidRequest::body(e.to_string()).into(),
            UploadError::TooLarge => Self::body_too_large(MAX_UPLOAD_BYTES),
            UploadError::QuotaExceeded { .. } => Self {
                // The quota is per UTC day: the next one starts at midnight.
                retry_after: Some(until_next_utc_day(time::OffsetDateTime::now_utc())),
                ..Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "UPLOAD_QUOTA_EXCEEDED", e.to_string())
            },
            UploadError::NotFound => Self::new(StatusCode::NOT_FOUND, "not_found", "FILE_NOT_FOUND", e.to_string()),
            UploadError::Store(e) => e.into(),
        }
    }
}

impl ApiError {
    /// 403 `INVALID_SIGNATURE`: an output link that is not one the service signed, or expired.
    #[must_use]
    pub fn invalid_link() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "INVALID_SIGNATURE",
            "this link is not valid or has expired; read the job again for a fresh one",
        )
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn an_upload_quota_renews_at_the_next_midnight_utc() {
        let evening = datetime!(2026-11-28 23:59:30 +01:00);
        assert_eq!(until_next_utc_day(evening), Duration::from_secs(3600 + 30), "22:59:30 UTC");
        assert_eq!(until_next_utc_day(datetime!(2026-11-28 00:00 UTC)), Duration::from_secs(86_400));
    }
}
