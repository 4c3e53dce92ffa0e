//! The API's answers built from domain values: each function here is the view of one domain
//! value as an API type, so that the API stays exactly as the spec writes it whatever the domain
//! keeps internally.

use genjobs_api::providers::{KeyCapacity, ProviderCapacity, WaitingCount};
use genjobs_api::{
    Account, CancelReceipt, CreatedUser, Job, JobError, JobErrorDetails, JobMeta, JobPage, JobState, Output,
    OutputMeta, ProviderStatus, Quote, Receipt, StreamEvent, User,
};
use genjobs_domain::capacity::ProviderLoad;
use genjobs_domain::job::{self, Job as DomainJob};
use genjobs_domain::output::{OutputCopy, OutputItem};
use genjobs_domain::ports;
use genjobs_domain::usecases::{self, JobListing};
use time::OffsetDateTime;

use crate::links::OutputLinks;

/// ISO 8601 UTC with milliseconds, e.g. `2026-11-21T23:14:54.123Z`. Written out by hand rather
/// than through a format description, whose formatting can fail.
#[must_use]
pub fn iso(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    // Written digit by digit into the shape `0000-00-00T00:00:00.000Z`: `format!` with its
    // padding was a few percent of a GET of a job, which has up to four of these.
    let mut text = *b"0000-00-00T00:00:00.000Z";
    let fields = [
        (0, 4, u32::try_from(at.year()).unwrap_or(0)),
        (5, 2, u32::from(u8::from(at.month()))),
        (8, 2, u32::from(at.day())),
        (11, 2, u32::from(at.hour())),
        (14, 2, u32::from(at.minute())),
        (17, 2, u32::from(at.second())),
        (20, 3, u32::from(at.millisecond())),
    ];
    for (start, width, mut value) in fields {
        for digit in text[start..start + width].iter_mut().rev() {
            *digit = b'0' + u8::try_from(value % 10).unwrap_or(0);
            value /= 10;
        }
    }
    text.iter().map(|&byte| char::from(byte)).collect()
}

/// The API's name of a job's state.
#[must_use]
pub fn state_view(state: job::JobState) -> JobState {
    match state {
        job::JobState::Queued => JobState::Queued,
        job::JobState::Running => JobState::Running,
        job::JobState::Succeeded => JobState::Succeeded,
        job::JobState::Failed => JobState::Failed,
        job::JobState::Canceled => JobState::Canceled,
    }
}

/// Where a client reads output `index` of `job`: the signed link to the service's copy when it
/// keeps one, else the provider's URL.
#[must_use]
pub fn output_url(job: &DomainJob, index: usize, item: &OutputItem, links: &OutputLinks<'_>) -> String {
    match &item.copy {
        Some(OutputCopy::Stored(_)) => links.url(job.id(), index),
        _ => item.url.clone(),
    }
}

fn output_view(job: &DomainJob, index: usize, item: &OutputItem, links: &OutputLinks<'_>) -> Output {
    let m = &item.meta;
    let (content_type, size_bytes) = match &item.copy {
        Some(OutputCopy::Stored(file)) => (file.content_type.clone(), Some(file.size)),
        _ => (m.content_type.clone(), None),
    };
    Output {
        url: output_url(job, index, item, links),
        kind: item.kind.as_str().to_owned(),
        meta: OutputMeta {
            content_type,
            width: m.width,
            height: m.height,
            duration_sec: m.duration_sec,
            seed: m.seed,
            stored: item.copy.as_ref().map(|copy| matches!(copy, OutputCopy::Stored(_))),
            upstream_url: item.copy.as_ref().map(|_| item.url.clone()),
            size_bytes,
        },
    }
}

pub(crate) fn outputs(job: &DomainJob, links: &OutputLinks<'_>) -> Option<Vec<Output>> {
    job.outputs().map(|items| items.iter().enumerate().map(|(i, item)| output_view(job, i, item, links)).collect())
}

pub(crate) fn error_view(e: &job::JobError) -> JobError {
    JobError {
        kind: e.error_type().to_owned(),
        code: e.code.as_str().to_owned(),
        message: e.message.clone(),
        details: (e.code == job::JobErrorCode::ContentRefused && !e.categories.is_empty())
            .then(|| JobErrorDetails { categories: e.categories.clone() }),
    }
}

/// The job, its stored outputs linked by `links`.
#[must_use]
pub fn job_view(job: &DomainJob, links: &OutputLinks<'_>) -> Job {
    Job {
        id: job.id().to_string(),
        state: state_view(job.state()),
        progress: job.progress(),
        model: job.model().to_string(),
        modality: job.modality().as_str().to_owned(),
        outputs: outputs(job, links),
        error: job.error().map(error_view),
        created_at: iso(job.created_at()),
        started_at: job.started_at().map(iso),
        finished_at: job.finished_at().map(iso),
        credits_held: job.credits_held().get(),
        credits_actual: job.credits_actual().map(|c| c.get()),
        upstream: job.upstream().map(|at| at.provider().to_owned()),
        meta: job_meta(job),
        batch_id: job.batch().map(|place| place.batch_id.to_string()),
    }
}

/// Why a queued job waits, when it does: for a slot of its provider's keys, or in the provider's
/// queue.
fn job_meta(job: &DomainJob) -> Option<JobMeta> {
    if job.waits_for_capacity() {
        return Some(JobMeta { waiting_for: Some("capacity".to_owned()), queue_position: None });
    }
    job.queue_position().map(|position| JobMeta { waiting_for: None, queue_position: Some(position) })
}

/// The job as a stream event, its stored outputs linked by `links`.
#[must_use]
pub fn event_view(job: &DomainJob, links: &OutputLinks<'_>) -> StreamEvent {
    StreamEvent {
        state: state_view(job.state()),
        progress: job.progress(),
        outputs: outputs(job, links),
        error: job.error().map(error_view),
    }
}

/// The receipt of both generation endpoints.
#[must_use]
pub fn receipt_view(r: usecases::Receipt) -> Receipt {
    Receipt {
        job_id: r.job_id.to_string(),
        state: state_view(r.state),
        model: r.model.to_string(),
        created_at: iso(r.created_at),
        credits_held: r.credits_held.get(),
    }
}

/// The answer of both quote endpoints.
#[must_use]
pub fn quote_view(q: usecases::Quote) -> Quote {
    Quote { model: q.model.to_string(), credits: q.credits.get() }
}

/// The answer of a cancel.
#[must_use]
pub fn cancel_view(r: usecases::CancelReceipt) -> CancelReceipt {
    CancelReceipt { id: r.id.to_string(), state: state_view(r.state), canceled_at: iso(r.canceled_at) }
}

/// A page of jobs, their stored outputs linked by `links`.
#[must_use]
pub fn job_page_view(page: &JobListing, links: &OutputLinks<'_>) -> JobPage {
    JobPage {
        data: page.jobs.iter().map(|job| job_view(job, links)).collect(),
        next: page.next.map(|id| id.to_string()),
    }
}

/// The caller's account.
#[must_use]
pub fn account_view(a: &ports::Account) -> Account {
    Account {
        user_id: a.user_id.to_string(),
        credits_available: a.balances.available.get(),
        credits_held: a.balances.held.get(),
        credits_spent: a.balances.spent.get(),
        rate_limit_per_minute: a.limits.rate_limit_per_minute,
        max_concurrent_jobs: a.limits.max_concurrent_jobs,
        active_jobs: a.active_jobs,
    }
}

/// A user as operators see it.
#[must_use]
pub fn user_view(a: &ports::Account) -> User {
    User {
        id: a.user_id.to_string(),
        name: a.name.clone(),
        credits_available: a.balances.available.get(),
        credits_held: a.balances.held.get(),
        credits_spent: a.balances.spent.get(),
        rate_limit_per_minute: a.limits.rate_limit_per_minute,
        max_concurrent_jobs: a.limits.max_concurrent_jobs,
        active_jobs: a.active_jobs,
        price_percent: a.price_percent.get(),
        created_at: iso(a.created_at),
    }
}

/// The view of `account` just created, with its first key.
#[must_use]
pub fn created_user_view(account: &ports::Account, api_key: &str) -> CreatedUser {
    CreatedUser {
        id: account.user_id.to_string(),
        name: account.name.clone(),
        api_key: api_key.to_owned(),
        credits_available: account.balances.available.get(),
        rate_limit_per_minute: account.limits.rate_limit_per_minute,
        max_concurrent_jobs: account.limits.max_concurrent_jobs,
    }
}

/// A provider's keys and waiting jobs, as `GET /api/admin/providers` shows them.
#[must_use]
pub fn provider_capacity_view(load: ProviderLoad) -> ProviderCapacity {
    ProviderCapacity {
        provider: load.provider,
        keys: load
            .keys
            .into_iter()
            .map(|key| KeyCapacity { key_hint: key.hint, in_flight: key.in_flight, max_in_flight: key.max_in_flight })
            .collect(),
        waiting: WaitingCount { normal: load.waiting.normal, low: load.waiting.low },
    }
}

/// A provider's breaker, as `/readyz?verbose` shows it.
#[must_use]
pub fn provider_status_view(p: ports::ProviderAvailability) -> ProviderStatus {
    let (breaker, probe_in) = match p.breaker {
        ports::BreakerState::Closed => ("closed", None),
        ports::BreakerState::Open { cools_for } => {
            ("open", Some(cools_for.as_secs() + u64::from(cools_for.subsec_nanos() > 0)))
        }
        ports::BreakerState::HalfOpen => ("half_open", None),
    };
    ProviderStatus {
        provider: p.provider,
        breaker: breaker.to_owned(),
        refusals_in_a_row: p.refusals_in_a_row,
        probe_in_secs: probe_in,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(1_700_000_000_123);
        assert_eq!(iso(at), "2023-11-14T22:13:20.123Z");
        let elsewhere = at.to_offset(time::UtcOffset::from_hms(2, 0, 0).unwrap());
        assert_eq!(iso(elsewhere), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn every_field_of_a_timestamp_keeps_its_leading_zeros() {
        let at = time::macros::datetime!(0987-01-02 03:04:05.006 UTC);
        assert_eq!(iso(at), "0987-01-02T03:04:05.006Z");
        let last = time::macros::datetime!(9999-12-31 23:59:59.999 UTC);
        assert_eq!(iso(last), "9999-12-31T23:59:59.999Z");
    }
}
