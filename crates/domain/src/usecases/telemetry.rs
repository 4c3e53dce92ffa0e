//! What the use cases count, through the `metrics` facade: like `tracing`, it records nothing
//! until the process installs a recorder (the binary installs a Prometheus one), so the domain
//! stays free of any exporter. Names start with `genjobs_`; labels are bounded (catalog models,
//! job states).

use std::time::Duration;

use metrics::{counter, gauge, histogram};

use crate::capacity::ProviderLoad;
use crate::job::{Job, JobState};
use crate::ports::UnfinishedJobs;

/// A job accepted, and the credits held for it.
pub(crate) fn job_accepted(job: &Job) {
    let model = job.model().to_string();
    counter!("genjobs_jobs_accepted_total", "model" => model.clone()).increment(1);
    counter!("genjobs_credits_held_total", "model" => model).increment(job.credits_held().get());
}

/// A job that has just become final: its state and provider, its error code when it failed or was
/// canceled, and the credits spent and released with it.
pub(crate) fn job_finished(job: &Job) {
    let model = job.model().to_string();
    let spent = job.credits_actual().map_or(0, |c| c.get());
    // The provider that had the job, `none` for one that ended before it was sent: a label bounded
    // by the configured providers.
    let provider = job.upstream().map_or_else(|| "none".to_owned(), |at| at.provider().to_owned());
    if let Some(bill) = job.provider_bill() {
        // A Prometheus counter of dollars is a float; the exact sums are the store's (usage,
        // reconciliation), so the conversion here only feeds dashboards.
        let dollars = bill.cost_usd.billionths() as f64 / 1e9;
        gauge!("genjobs_provider_cost_usd_total", "provider" => provider.clone(), "model" => model.clone())
            .increment(dollars);
    }
    counter!("genjobs_jobs_finished_total", "model" => model.clone(), "state" => job.state().as_str(), "provider" => provider)
        .increment(1);
    if let Some(error) = job.error() {
        // `code` comes from a closed set (`JobErrorCode`), so the label stays bounded.
        counter!("genjobs_jobs_failed_total", "model" => model.clone(), "code" => error.code.as_str()).increment(1);
    }
    counter!("genjobs_credits_spent_total", "model" => model.clone()).increment(spent);
    counter!("genjobs_credits_released_total", "model" => model)
        .increment(job.credits_held().get().saturating_sub(spent));
}

/// Jobs not yet final, by state, as the store counts them.
pub(crate) fn unfinished(jobs: UnfinishedJobs) {
    gauge!("genjobs_jobs", "state" => JobState::Queued.as_str()).set(jobs.queued as f64);
    gauge!("genjobs_jobs", "state" => JobState::Running.as_str()).set(jobs.running as f64);
}

/// A job past its deadline and the provider's answer to the cancel sent for it (`requested`,
/// `already_completed`, `failed`).
pub(crate) fn timeout_cancel(outcome: &'static str) {
    counter!("genjobs_upstream_timeout_cancels_total", "outcome" => outcome).increment(1);
}

/// How late a client webhook's attempt started after its due time.
pub(crate) fn webhook_lag(lag: Duration) {
    histogram!("genjobs_client_webhook_lag_seconds").record(lag.as_secs_f64());
}

/// One client webhook attempt and what came of its event: delivered, retrying, or given up.
pub(crate) fn webhook_attempt(delivered: bool, retrying: bool) {
    counter!("genjobs_client_webhook_attempts_total").increment(1);
    let outcome = match (delivered, retrying) {
        (true, _) => "delivered",
        (false, true) => "retrying",
        (false, false) => "given_up",
    };
    counter!("genjobs_client_webhook_deliveries_total", "outcome" => outcome).increment(1);
}

/// The age of the oldest client webhook event still to be tried (0 when there is none).
pub(crate) fn webhook_outbox(oldest_pending: Option<time::Duration>) {
    let age = oldest_pending.map_or(0.0, |age| age.as_seconds_f64().max(0.0));
    gauge!("genjobs_client_webhook_oldest_pending_seconds").set(age);
}

/// Each provider key's jobs in flight and each provider's waiting jobs by priority, as the
/// slots count them; labels bounded by the configured keys.
pub(crate) fn provider_loads(loads: &[ProviderLoad]) {
    for load in loads {
        for key in &load.keys {
            gauge!("genjobs_provider_in_flight", "provider" => load.provider.clone(), "key_hint" => key.hint.clone())
                .set(key.in_flight as f64);
        }
        for (priority, waiting) in [("normal", load.waiting.normal), ("low", load.waiting.low)] {
            gauge!("genjobs_provider_waiting", "provider" => load.provider.clone(), "priority" => priority)
                .set(waiting as f64);
        }
    }
}
