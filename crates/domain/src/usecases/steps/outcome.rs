//! What the provider's answers do to a job: the trigger a result (or a reported failure) causes,
//! when to poll next, the progress to show, and committing the change.

use super::{Cadence, FALLBACK_RUN_SECS, JobSteps, MAX_BACKOFF_EXPONENT, Stepped, UnrecordedSubmission};
use crate::job::{Job, JobError, JobErrorCode, MAX_RUNNING_PROGRESS, Trigger};
use crate::ports::{Commit, ReportedUsage, ResultFailure, StoreError, UpstreamResult};
use tracing::Instrument;

/// What a job's result (or a failure reported in its place) does to it, whether a poll fetched
/// it or the provider pushed it; `None` for a transient failure, which ends nothing.
pub(crate) fn ending_trigger(job: &Job, fetched: Result<UpstreamResult, ResultFailure>) -> Option<Trigger> {
    let reported = |usage: ReportedUsage| job.billing().and_then(|billing| usage.units(billing.cost.per));
    let failure = match fetched {
        Ok(result) if result.outputs.is_empty() => {
            let error = JobError::new(JobErrorCode::OutputInvalid, "the provider returned no outputs");
            return Some(Trigger::Failed { error, reported_units: reported(result.usage) });
        }
        Ok(result) => {
            let credits_actual = job.rate().delivered(job.input(), &result.outputs, job.credits_held());
            let reported_units = reported(result.usage);
            return Some(Trigger::Succeeded { outputs: result.outputs, credits_actual, reported_units });
        }
        Err(failure) => failure,
    };
    let (failure, usage) = match failure {
        ResultFailure::Billed { failure, usage } => (*failure, usage),
        failure => (failure, ReportedUsage::default()),
    };
    let error = failed_with(failure)?;
    Some(Trigger::Failed { error, reported_units: reported(usage) })
}

/// The error a job fails with for a failure the provider reported; `None` for a transient one.
fn failed_with(failure: ResultFailure) -> Option<JobError> {
    let (code, message) = match failure {
        ResultFailure::Rejected(reason) => {
            (JobErrorCode::UpstreamRejected, format!("the provider refused the input: {reason}"))
        }
        ResultFailure::ContentRefused(reason) => {
            (JobErrorCode::ContentRefused, format!("the provider refused the content: {reason}"))
        }
        ResultFailure::Failed(reason) => (JobErrorCode::UpstreamFailed, format!("the generation failed: {reason}")),
        ResultFailure::Invalid(reason) => {
            (JobErrorCode::OutputInvalid, format!("the provider's result could not be read: {reason}"))
        }
        ResultFailure::Billed { failure, .. } => return failed_with(*failure),
        ResultFailure::Transient(_) => return None,
    };
    Some(JobError::new(code, message))
}

impl JobSteps {
    /// What a job's fetched result (or a failure reported in its place) does to it; a transient
    /// failure backs off.
    pub(super) fn result(
        &self,
        job: &Job,
        cadence: Cadence,
        fetched: Result<UpstreamResult, ResultFailure>,
    ) -> Trigger {
        if let Err(ResultFailure::Transient(reason)) = &fetched {
            tracing::warn!(job_id = %job.id(), %reason, "result fetch failed; backing off");
        }
        ending_trigger(job, fetched).unwrap_or_else(|| Trigger::UpstreamUnreachable {
            next_poll_at: self.next_poll(cadence, job.poll_failures() + 1),
        })
    }

    /// When to poll a job next. On success the cadence follows the job's own schedule (the time
    /// it was due plus one interval), not the time the poll finished, so that a slow answer does
    /// not stretch every interval; after failures it backs off from now.
    pub(super) fn next_poll(&self, cadence: Cadence, failures: u32) -> time::OffsetDateTime {
        let now = self.ports.clock.now();
        if failures > 0 {
            return now + self.settings.poll_interval * (1u32 << failures.min(MAX_BACKOFF_EXPONENT));
        }
        let next = cadence.due + cadence.interval;
        if next > now { next } else { now + cadence.interval / 10 }
    }

    /// The provider's percentage when it gives one, otherwise the time run so far against the
    /// model's typical run time; the job's own rule keeps it monotonic and below 100.
    pub(super) fn progress(&self, job: &Job, percent: Option<u8>) -> u8 {
        if let Some(percent) = percent {
            return percent.min(MAX_RUNNING_PROGRESS);
        }
        let typical =
            self.catalog.current().any_model(job.model().as_str()).map_or(FALLBACK_RUN_SECS, |m| m.typical_run_secs);
        let started = job.started_at().unwrap_or_else(|| self.ports.clock.now());
        let elapsed = (self.ports.clock.now() - started).as_seconds_f64().max(0.0);
        let estimate = (elapsed / f64::from(typical.max(1)) * 100.0).floor();
        estimate.min(f64::from(MAX_RUNNING_PROGRESS)) as u8
    }

    /// Commits `trigger` on `job`; returns the job to keep holding, or `None` when it is final
    /// or changed meanwhile (canceled, say: a late provider answer is discarded). A poll that
    /// changes nothing a client can see is not written at all: the next poll time lives in this
    /// driver's memory while it holds the job.
    /// Commits `trigger`; on a store failure, logs it and lets the job go (its lease runs out and
    /// the step repeats, here or on another replica).
    pub(super) async fn commit(&self, job: &Job, trigger: Trigger) -> Option<Job> {
        let name = trigger.name();
        match self.try_commit(job, trigger).await {
            Ok(kept) => kept,
            Err(e) => {
                tracing::warn!(job_id = %job.id(), trigger = name, error = %e, "could not commit; the job is let go, for a driver to claim and step again");
                None
            }
        }
    }

    /// Records a submission the provider accepted (see [`UnrecordedSubmission`]): when the
    /// store fails before the job's timeout, the driver is to try again after a back-off.
    pub async fn record_submission(&self, unrecorded: UnrecordedSubmission) -> Stepped {
        let UnrecordedSubmission { job, submitted, failures, .. } = unrecorded;
        match self.try_commit(&job, submitted.clone()).await {
            Ok(kept) => Stepped::Done(kept),
            Err(e) if self.ports.clock.now() - job.created_at() < self.settings.job_timeout => {
                let failures = failures.saturating_add(1);
                tracing::warn!(job_id = %job.id(), error = %e, failures, "could not record the submission; retrying");
                let retry_in = self.settings.poll_interval * (1u32 << failures.min(MAX_BACKOFF_EXPONENT));
                Stepped::Unrecorded(UnrecordedSubmission { job, submitted, failures, retry_in })
            }
            Err(e) => {
                tracing::error!(job_id = %job.id(), error = %e, "could not record the submission before the job timed out");
                Stepped::Done(None)
            }
        }
    }

    async fn try_commit(&self, job: &Job, trigger: Trigger) -> Result<Option<Job>, StoreError> {
        let name = trigger.name();
        let transition = match job.apply(trigger, self.ports.clock.now()) {
            Ok(t) => t,
            Err(e) => {
                tracing::info!(job_id = %job.id(), trigger = name, reason = %e, "provider event discarded");
                return Ok(None);
            }
        };
        if transition.is_recomputable() && transition.job().same_observable_state(job) {
            return Ok(Some(transition.into_unwritten_job()));
        }
        let changes_state = transition.changes_state();
        let span = match self.ports.traces.are_on() {
            true => tracing::info_span!("job.transition", genjobs.job_id = %job.id(), genjobs.trigger = name),
            false => tracing::Span::none(),
        };
        Ok(match self.ports.jobs.commit(transition).instrument(span).await {
            Ok(Commit::Applied(stored)) => {
                if changes_state {
                    tracing::info!(
                        job_id = %stored.id(),
                        state = stored.state().as_str(),
                        progress = stored.progress(),
                        credits_actual = stored.credits_actual().map(|c| c.get()),
                        error_code = stored.error().as_ref().map(|e| e.code.as_str()),
                        "job {}", name
                    );
                }
                if changes_state {
                    self.ports.events.publish(stored.id()).await;
                    if stored.state().is_final() {
                        crate::usecases::job_ended(self.ports.events.as_ref(), &stored).await;
                    }
                }
                (!stored.state().is_final()).then_some(stored)
            }
            Ok(Commit::Stale(current)) => {
                tracing::info!(job_id = %job.id(), trigger = name, state = current.state().as_str(), "job changed meanwhile; provider event discarded");
                None
            }
            Ok(Commit::Missing) => {
                tracing::warn!(job_id = %job.id(), "job vanished from the store");
                None
            }
            // Only an admission takes a slot, and `admission.rs` commits it itself.
            Ok(Commit::OwnerAtLimit(current)) => {
                tracing::warn!(job_id = %job.id(), trigger = name, "a change other than an admission was refused for the owner's limit");
                (!current.state().is_final()).then_some(current)
            }
            Err(e) => return Err(e),
        })
    }
}
