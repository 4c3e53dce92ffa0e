//! [`Error`]: what a call can end with other than its answer.

use std::time::Duration;

/// The error envelope of the API, as the service sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The class of error, e.g. `insufficient_credits`.
    pub kind: String,
    /// The precise error, e.g. `NOT_ENOUGH_CREDITS`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// The body field or parameter at fault.
    pub param: Option<String>,
    /// How long to wait before trying again (429, and 503 when given).
    pub retry_after: Option<Duration>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)?;
        if let Some(param) = &self.param {
            write!(f, " (param `{param}`)")?;
        }
        Ok(())
    }
}

/// Why a call did not give its answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The service answered with an error.
    #[error("{0}")]
    Api(ApiError),
    /// The service could not be reached, or the connection broke.
    #[error("cannot reach the service: {0}")]
    Transport(#[from] reqwest::Error),
    /// The service answered with something this client cannot read.
    #[error("unexpected answer: {0}")]
    Decode(String),
    /// [`crate::Client::wait_final`] ran out of time; the job as last seen.
    #[error("the job was not final after {0:?}")]
    Timeout(Duration),
    /// A download could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// Where.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl Error {
    /// The envelope, when the service refused.
    #[must_use]
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) => Some(e),
            _ => None,
        }
    }

    /// Whether trying the same call again later may succeed: a broken connection, a 429, a 5xx.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Api(e) => e.status == 429 || e.status >= 500,
            Error::Transport(e) => e.is_connect() || e.is_timeout() || e.is_request(),
            Error::Decode(_) | Error::Timeout(_) | Error::Io { .. } => false,
        }
    }
}
