//! The moderation check of an unsent job, made just before it is sent: what the service's answer
//! (or its silence) does to the job, as [`crate::moderation::ModerationSettings::decide`] says.
//! The outcome is committed before the send, so that no replica sends a job whose check has not
//! passed: one that finds a job unchecked checks it again, and one that finds it being sent
//! without a recorded answer fails it rather than send it twice.

use std::sync::Arc;

use metrics::counter;

use super::{Cadence, JobSteps, Stepped};
use crate::catalog::Model;
use crate::job::{Job, JobError, JobErrorCode, Trigger};
use crate::moderation::{Moderation, ModerationAnswer, ModerationContent, ModerationDecision, ModerationSettings};
use crate::ports::ModerationService;

/// The moderation service the steps ask, and how its failures are borne.
#[derive(Clone)]
pub struct Moderator {
    /// The service.
    pub service: Arc<dyn ModerationService>,
    /// Its retry window, and whether to fail open.
    pub settings: ModerationSettings,
}

impl JobSteps {
    /// The job to send, its check passed (or not needed); otherwise what the step leaves its
    /// driver with: the job refused, given up on, or to be checked again later.
    pub(super) async fn screen(&self, job: Job, model: &Model, cadence: Cadence) -> Result<Job, Stepped> {
        let Some(moderator) = &self.moderator else { return Ok(job) };
        if !model.moderate || job.moderation().is_some() {
            return Ok(job);
        }
        let answer = match moderator.service.check(job.id(), &ModerationContent::of(job.input())).await {
            Ok(answer) => {
                let result = match &answer {
                    ModerationAnswer::Passed => "passed",
                    ModerationAnswer::Flagged { .. } => "flagged",
                };
                counter!("genjobs_moderation_total", "result" => result).increment(1);
                Some(answer)
            }
            Err(e) => {
                counter!("genjobs_moderation_total", "result" => "unavailable").increment(1);
                tracing::warn!(job_id = %job.id(), error = %e, "moderation check failed");
                None
            }
        };
        let now = self.ports.clock.now();
        let retry_at = self.next_poll(cadence, job.poll_failures() + 1);
        let trigger = match moderator.settings.decide(answer, job.created_at(), now, retry_at) {
            ModerationDecision::Send(outcome) => {
                tracing::info!(job_id = %job.id(), moderation = outcome.as_str(), "moderation let the job through");
                return self.commit(&job, Trigger::Moderated { outcome }).await.ok_or(Stepped::Done(None));
            }
            ModerationDecision::Refuse(categories) => {
                tracing::info!(job_id = %job.id(), categories = %categories.join(","), "moderation flagged the job");
                let error = JobError::new(JobErrorCode::ContentRefused, "the moderation service flagged the content")
                    .with_categories(categories);
                Trigger::ModerationRefused { outcome: Moderation::Flagged, error }
            }
            ModerationDecision::RetryAt(next_poll_at) => Trigger::ModerationDelayed { next_poll_at },
            ModerationDecision::GiveUp => Trigger::ModerationRefused {
                outcome: Moderation::Unavailable,
                error: JobError::new(
                    JobErrorCode::ModerationUnavailable,
                    "the moderation service could not check the content in time",
                ),
            },
        };
        Err(Stepped::Done(self.commit(&job, trigger).await))
    }
}
