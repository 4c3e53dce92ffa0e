//! [`ModerationService`]: the service that checks a job's content before any provider sees it.

use async_trait::async_trait;

use crate::ids::JobId;
use crate::moderation::{ModerationAnswer, ModerationContent};

/// Why the moderation service gave no answer: it could not be reached, timed out, or answered
/// with an error or with something that is not a moderation result. Whether and when the check
/// is tried again is the domain's decision ([`crate::moderation::ModerationSettings::decide`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the moderation service gave no answer: {0}")]
pub struct ModerationUnavailable(pub String);

/// A moderation service (OpenAI's moderation API, or one that speaks it).
///
/// # Errors
/// [`ModerationUnavailable`] whenever no answer could be read; the message never holds the
/// service's key.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait ModerationService: Send + Sync {
    /// Checks `content`, of the job `job_id`, once.
    ///
    /// # Errors
    /// [`ModerationUnavailable`] when the service gave no answer.
    async fn check(
        &self,
        job_id: JobId,
        content: &ModerationContent,
    ) -> Result<ModerationAnswer, ModerationUnavailable>;
}
