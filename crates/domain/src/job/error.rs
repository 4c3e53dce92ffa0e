//! Why a job ended badly, and where it lives at the provider.

/// Code of a final job's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobErrorCode {
    /// The provider failed the job.
    UpstreamFailed,
    /// The job was not final within the job timeout.
    UpstreamTimeout,
    /// The provider refused the input.
    UpstreamRejected,
    /// The provider's result could not be read.
    OutputInvalid,
    /// The owner canceled the job.
    JobCanceled,
    /// The job had not started running at its provider by the time its request allowed
    /// (`start_within_secs`).
    DeadlineExceeded,
    /// The content was refused: flagged by the moderation service before any provider saw it,
    /// or refused by the provider's own content policy.
    ContentRefused,
    /// The moderation service could not check the job within its retry window.
    ModerationUnavailable,
    /// A batch item not sent before its batch's completion window closed.
    BatchExpired,
}

impl JobErrorCode {
    /// Every code.
    pub const ALL: [JobErrorCode; 9] = [
        JobErrorCode::UpstreamFailed,
        JobErrorCode::UpstreamTimeout,
        JobErrorCode::UpstreamRejected,
        JobErrorCode::OutputInvalid,
        JobErrorCode::JobCanceled,
        JobErrorCode::DeadlineExceeded,
        JobErrorCode::ContentRefused,
        JobErrorCode::ModerationUnavailable,
        JobErrorCode::BatchExpired,
    ];

    /// The `type` that goes with the code.
    #[must_use]
    pub fn error_type(self) -> &'static str {
        match self {
            JobErrorCode::JobCanceled => "canceled",
            JobErrorCode::ContentRefused => "invalid_request",
            _ => "upstream_error",
        }
    }

    /// The code's name, e.g. `UPSTREAM_FAILED`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            JobErrorCode::UpstreamFailed => "UPSTREAM_FAILED",
            JobErrorCode::UpstreamTimeout => "UPSTREAM_TIMEOUT",
            JobErrorCode::UpstreamRejected => "UPSTREAM_REJECTED",
            JobErrorCode::OutputInvalid => "OUTPUT_INVALID",
            JobErrorCode::JobCanceled => "JOB_CANCELED",
            JobErrorCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            JobErrorCode::ContentRefused => "CONTENT_REFUSED",
            JobErrorCode::ModerationUnavailable => "MODERATION_UNAVAILABLE",
            JobErrorCode::BatchExpired => "BATCH_EXPIRED",
        }
    }

    /// Parses [`JobErrorCode::as_str`].
    #[must_use]
    pub fn parse(text: &str) -> Option<JobErrorCode> {
        JobErrorCode::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

/// Why a job failed or was canceled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError {
    /// The code; its `type` is [`JobErrorCode::error_type`].
    pub code: JobErrorCode,
    /// For a human; never the provider's key or internals.
    pub message: String,
    /// The moderation categories that refused the content, for a `CONTENT_REFUSED` the
    /// moderation service decided; empty otherwise.
    pub categories: Vec<String>,
}

impl JobError {
    /// An error of `code`.
    #[must_use]
    pub fn new(code: JobErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), categories: Vec::new() }
    }

    /// The same error, naming the moderation `categories` that refused the content.
    #[must_use]
    pub fn with_categories(mut self, categories: Vec<String>) -> Self {
        self.categories = categories;
        self
    }

    /// `upstream_error` or `canceled`.
    #[must_use]
    pub fn error_type(&self) -> &'static str {
        self.code.error_type()
    }
}
