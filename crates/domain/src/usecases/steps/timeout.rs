//! A job past one of its deadlines: the job timeout (`UPSTREAM_TIMEOUT`, counted from the send),
//! or its start deadline (`DEADLINE_EXCEEDED`, from `start_within_secs`, for a job that had not
//! started running by then). In both cases it fails, and a provider that has it is told to stop
//! it so that it does not go on running (and billing) a job nobody will be given. When the provider
//! answers that the job had already completed, its result is fetched instead: the job may still
//! succeed, and is then charged like any other.

use super::JobSteps;
use crate::job::{Job, JobError, JobErrorCode, Trigger, UpstreamRef};
use crate::ports::CancelOutcome;

impl JobSteps {
    /// Ends a job that passed its job timeout; returns the job to keep holding (none: it is
    /// final, or changed meanwhile).
    pub(super) async fn time_out(&self, job: &Job) -> Option<Job> {
        let error = JobError::new(JobErrorCode::UpstreamTimeout, "the job did not finish in time");
        match job.upstream() {
            Some(upstream) => self.stop_at_provider(job, upstream, error).await,
            None => self.commit(job, Trigger::failed(error)).await,
        }
    }

    /// Ends a job that had not started running by its start deadline, stopping it at its
    /// provider when it was sent (`upstream`); everything held is released by the failure.
    pub(super) async fn miss_start(&self, job: &Job, upstream: Option<&UpstreamRef>) -> Option<Job> {
        let deadline = job.start_by().map_or_else(String::new, |at| {
            let within = (at - job.created_at()).whole_seconds();
            let at = at.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| at.to_string());
            format!(" ({at}, {within} s after it was accepted)")
        });
        let error = JobError::new(
            JobErrorCode::DeadlineExceeded,
            format!("the job had not started running at its provider by its start_within_secs deadline{deadline}"),
        );
        tracing::info!(job_id = %job.id(), sent = upstream.is_some(), "job missed its start deadline");
        match upstream {
            Some(upstream) => self.stop_at_provider(job, upstream, error).await,
            None => self.commit(job, Trigger::failed(error)).await,
        }
    }

    /// Asks the provider to stop the job at `upstream`, then fails it with `error`, unless the
    /// provider says it had completed: then its result ends it.
    async fn stop_at_provider(&self, job: &Job, upstream: &UpstreamRef, error: JobError) -> Option<Job> {
        let outcome = self.ports.upstream.cancel_unless_done(job.id(), upstream).await;
        crate::usecases::telemetry::timeout_cancel(match &outcome {
            Ok(CancelOutcome::Requested) => "requested",
            Ok(CancelOutcome::AlreadyCompleted) => "already_completed",
            Err(_) => "failed",
        });
        match outcome {
            Ok(CancelOutcome::Requested) => {
                tracing::info!(job_id = %job.id(), code = error.code.as_str(), "job past its deadline; the provider was asked to stop it");
            }
            Ok(CancelOutcome::AlreadyCompleted) => {
                tracing::info!(job_id = %job.id(), code = error.code.as_str(), "job past its deadline but completed at the provider; fetching its result");
                let fetched = self.ports.upstream.result(job.id(), upstream, job.modality()).await;
                let fetched =
                    crate::usecases::outputs::keep_result(self.ports.outputs.as_ref(), job.id(), fetched).await;
                if let Some(ending) = super::ending_trigger(job, fetched) {
                    return self.commit(job, ending).await;
                }
            }
            Err(e) => {
                tracing::warn!(job_id = %job.id(), code = error.code.as_str(), error = %e, "job past its deadline; the provider could not be told to stop it");
            }
        }
        self.commit(job, Trigger::failed(error)).await
    }
}
