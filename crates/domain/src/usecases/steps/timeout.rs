//! A job past its deadline: it fails `UPSTREAM_TIMEOUT`, and the provider is told to stop it so
//! that it does not go on running (and billing) a job nobody will be given. When the provider
//! answers that the job had already completed, its result is fetched instead: the job may still
//! succeed, and is then charged like any other.

use super::JobSteps;
use crate::job::{Job, JobError, JobErrorCode, Trigger};
use crate::ports::CancelOutcome;

impl JobSteps {
    /// Ends a job that passed its deadline; returns the job to keep holding (none: it is final,
    /// or changed meanwhile).
    pub(super) async fn time_out(&self, job: &Job) -> Option<Job> {
        let timed_out =
            Trigger::Failed { error: JobError::new(JobErrorCode::UpstreamTimeout, "the job did not finish in time") };
        let Some(upstream) = job.upstream() else {
            return self.commit(job, timed_out).await;
        };
        let outcome = self.ports.upstream.cancel_unless_done(job.id(), upstream).await;
        crate::usecases::telemetry::timeout_cancel(match &outcome {
            Ok(CancelOutcome::Requested) => "requested",
            Ok(CancelOutcome::AlreadyCompleted) => "already_completed",
            Err(_) => "failed",
        });
        match outcome {
            Ok(CancelOutcome::Requested) => {
                tracing::info!(job_id = %job.id(), "job timed out; the provider was asked to stop it");
            }
            Ok(CancelOutcome::AlreadyCompleted) => {
                tracing::info!(job_id = %job.id(), "job timed out but had completed at the provider; fetching its result");
                let fetched = match self.ports.upstream.result(job.id(), upstream, job.modality()).await {
                    Ok(outputs) if !outputs.is_empty() => {
                        Ok(crate::usecases::outputs::keep_outputs(self.ports.outputs.as_ref(), job.id(), outputs).await)
                    }
                    other => other,
                };
                if let Some(ending) = super::ending_trigger(job, fetched) {
                    return self.commit(job, ending).await;
                }
            }
            Err(e) => {
                tracing::warn!(job_id = %job.id(), error = %e, "job timed out; the provider could not be told to stop it");
            }
        }
        self.commit(job, timed_out).await
    }
}
