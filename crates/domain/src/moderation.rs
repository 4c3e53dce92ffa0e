//! Moderation: a job's prompt and image inputs are checked by a moderation service before the job
//! goes to any provider. This module holds what is checked ([`ModerationContent`]), what the
//! service can answer ([`ModerationAnswer`]), what a job keeps of its check ([`Moderation`]) and
//! the rule that turns an answer, or the service's silence, into what happens to the job
//! ([`ModerationSettings::decide`]). The rule never waits: a check to be tried again comes back
//! as a time, and the driver waits for it.

use std::time::Duration;

use time::OffsetDateTime;

use crate::input::GenerationInput;

/// How long the moderation service may stay unreachable for one job, by default
/// (`GENJOBS_MODERATION_RETRY_WINDOW_SECS`): counted from the job's acceptance.
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(60);

/// The model asked for, by default (`GENJOBS_MODERATION_MODEL`).
pub const DEFAULT_MODEL: &str = "omni-moderation-latest";

/// What of a job is checked: its prompt and its image inputs' URLs, the same links its provider
/// is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModerationContent {
    /// The prompt.
    pub text: String,
    /// The image inputs, by URL.
    pub images: Vec<String>,
}

impl ModerationContent {
    /// What of `input` is checked.
    #[must_use]
    pub fn of(input: &GenerationInput) -> Self {
        Self { text: input.prompt.clone(), images: input.image_inputs.clone() }
    }
}

/// What the moderation service answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModerationAnswer {
    /// Nothing was flagged.
    Passed,
    /// Something was flagged, under these category names (the service's own).
    Flagged {
        /// The flagged categories, sorted, each once.
        categories: Vec<String>,
    },
}

/// What a job keeps of its moderation check, for operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moderation {
    /// The check passed: the job may be sent.
    Passed,
    /// The service flagged the content: the job failed `CONTENT_REFUSED`, unsent.
    Flagged,
    /// The service could not be reached in time: the job failed `MODERATION_UNAVAILABLE`, unsent.
    Unavailable,
    /// The service could not be reached in time and the operator lets such jobs through
    /// (`GENJOBS_MODERATION_FAIL_OPEN`): the job was sent unchecked.
    Unchecked,
}

impl Moderation {
    /// Every outcome.
    pub const ALL: [Moderation; 4] =
        [Moderation::Passed, Moderation::Flagged, Moderation::Unavailable, Moderation::Unchecked];

    /// Its name, as kept and shown.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Moderation::Passed => "passed",
            Moderation::Flagged => "flagged",
            Moderation::Unavailable => "unavailable",
            Moderation::Unchecked => "unchecked",
        }
    }

    /// Parses [`Moderation::as_str`].
    #[must_use]
    pub fn parse(text: &str) -> Option<Moderation> {
        Moderation::ALL.into_iter().find(|m| m.as_str() == text)
    }
}

/// How the moderation service's failures are borne.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModerationSettings {
    /// How long after its acceptance a job's check is still tried again.
    pub retry_window: Duration,
    /// Whether a job whose check could not be had in time is sent unchecked rather than failed.
    pub fail_open: bool,
}

impl Default for ModerationSettings {
    fn default() -> Self {
        Self { retry_window: DEFAULT_RETRY_WINDOW, fail_open: false }
    }
}

/// What a check's outcome does to a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModerationDecision {
    /// Send it; the job keeps this outcome ([`Moderation::Passed`] or [`Moderation::Unchecked`]).
    Send(Moderation),
    /// Fail it `CONTENT_REFUSED`, naming these categories.
    Refuse(Vec<String>),
    /// Check it again at this time.
    RetryAt(OffsetDateTime),
    /// Fail it `MODERATION_UNAVAILABLE`.
    GiveUp,
}

impl ModerationSettings {
    /// What the outcome of a check made at `now` does to a job accepted at `accepted`: `None`
    /// for a service that could not answer, which is tried again no later than `retry_at` while
    /// the window lasts, and once more at its end.
    #[must_use]
    pub fn decide(
        &self,
        answer: Option<ModerationAnswer>,
        accepted: OffsetDateTime,
        now: OffsetDateTime,
        retry_at: OffsetDateTime,
    ) -> ModerationDecision {
        match answer {
            Some(ModerationAnswer::Passed) => ModerationDecision::Send(Moderation::Passed),
            Some(ModerationAnswer::Flagged { categories }) => ModerationDecision::Refuse(categories),
            None => {
                let closes = accepted + self.retry_window;
                match (now < closes, self.fail_open) {
                    (true, _) => ModerationDecision::RetryAt(retry_at.min(closes)),
                    (false, true) => ModerationDecision::Send(Moderation::Unchecked),
                    (false, false) => ModerationDecision::GiveUp,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    const ACCEPTED: OffsetDateTime = datetime!(2026-11-30 12:00 UTC);

    fn settings(fail_open: bool) -> ModerationSettings {
        ModerationSettings { retry_window: Duration::from_secs(60), fail_open }
    }

    #[test]
    fn an_answer_decides_at_once() {
        let later = ACCEPTED + Duration::from_secs(5);
        assert_eq!(
            settings(false).decide(Some(ModerationAnswer::Passed), ACCEPTED, ACCEPTED, later),
            ModerationDecision::Send(Moderation::Passed)
        );
        let flagged = ModerationAnswer::Flagged { categories: vec!["violence".into()] };
        assert_eq!(
            settings(true).decide(Some(flagged), ACCEPTED, ACCEPTED, later),
            ModerationDecision::Refuse(vec!["violence".into()])
        );
    }

    #[test]
    fn silence_is_retried_until_the_window_closes_then_once_at_its_end() {
        let closes = ACCEPTED + Duration::from_secs(60);
        let early = ACCEPTED + Duration::from_secs(10);
        assert_eq!(
            settings(false).decide(None, ACCEPTED, early, early + Duration::from_secs(2)),
            ModerationDecision::RetryAt(early + Duration::from_secs(2))
        );
        let near = closes - Duration::from_secs(1);
        assert_eq!(
            settings(false).decide(None, ACCEPTED, near, near + Duration::from_secs(8)),
            ModerationDecision::RetryAt(closes)
        );
        assert_eq!(settings(false).decide(None, ACCEPTED, closes, closes), ModerationDecision::GiveUp);
        assert_eq!(
            settings(true).decide(None, ACCEPTED, closes, closes),
            ModerationDecision::Send(Moderation::Unchecked)
        );
    }

    #[test]
    fn outcomes_read_back_by_name() {
        for outcome in Moderation::ALL {
            assert_eq!(Moderation::parse(outcome.as_str()), Some(outcome));
        }
        assert_eq!(Moderation::parse("maybe"), None);
    }
}
