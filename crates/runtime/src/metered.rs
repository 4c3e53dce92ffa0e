//! [`MeteredUpstream`]: counts and times every call to the provider, whichever it is.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use genjobs_domain::capacity::ProviderKey;
use genjobs_domain::catalog::Model;
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{
    CancelOutcome, Delivery, NotificationRejected, PollFailure, ResultFailure, SendAs, SubmitFailure, UpstreamProvider,
    UpstreamReport, UpstreamResult, UpstreamStatus,
};
use metrics::{counter, histogram};
use tracing::Instrument;

/// Wraps a provider and records `genjobs_upstream_calls_total{provider, kind, outcome}` and
/// `genjobs_upstream_call_duration_seconds{provider, kind}` for each call (`kind`: submit, status,
/// result, cancel; `outcome`: ok, or the failure's class), and
/// `genjobs_upstream_notifications_total{provider, outcome}` for each notification the provider
/// pushed.
pub struct MeteredUpstream {
    inner: Arc<dyn UpstreamProvider>,
}

impl MeteredUpstream {
    /// Meters `inner`.
    #[must_use]
    pub fn new(inner: Arc<dyn UpstreamProvider>) -> Self {
        Self { inner }
    }
}

fn record<T, E>(
    provider: &'static str,
    kind: &'static str,
    started: Instant,
    result: &Result<T, E>,
    class: impl Fn(&E) -> &'static str,
) {
    let outcome = result.as_ref().map_or_else(class, |_| "ok");
    counter!("genjobs_upstream_calls_total", "provider" => provider, "kind" => kind, "outcome" => outcome).increment(1);
    histogram!("genjobs_upstream_call_duration_seconds", "provider" => provider, "kind" => kind)
        .record(started.elapsed().as_secs_f64());
}

fn submit_class(failure: &SubmitFailure) -> &'static str {
    match failure {
        SubmitFailure::Rejected(_) => "rejected",
        SubmitFailure::ContentRefused(_) => "content_refused",
        SubmitFailure::NotReached(_) => "not_reached",
        SubmitFailure::Ambiguous(_) => "ambiguous",
        SubmitFailure::AtCapacity(_) => "at_capacity",
    }
}

/// The span of one call to the provider, within the span of the step that makes it; none when the
/// step has none (traces are off).
fn call_span(provider: &'static str, kind: &'static str, job_id: JobId) -> tracing::Span {
    if tracing::Span::current().is_none() {
        return tracing::Span::none();
    }
    tracing::info_span!("provider.call", genjobs.job_id = %job_id, genjobs.provider = provider, genjobs.call = kind)
}

fn poll_class(failure: &PollFailure) -> &'static str {
    match failure {
        PollFailure::Transient(_) => "transient",
        PollFailure::Gone(_) => "gone",
    }
}

/// A failed result call's class; one the provider billed all the same counts as what it failed as.
fn result_class(failure: &ResultFailure) -> &'static str {
    match failure {
        ResultFailure::Rejected(_) => "rejected",
        ResultFailure::ContentRefused(_) => "content_refused",
        ResultFailure::Failed(_) => "failed",
        ResultFailure::Invalid(_) => "invalid",
        ResultFailure::Transient(_) => "transient",
        ResultFailure::Billed { failure, .. } => result_class(failure),
    }
}

#[async_trait]
impl UpstreamProvider for MeteredUpstream {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn serves(&self, provider: &str) -> bool {
        self.inner.serves(provider)
    }

    fn refused_extra_key(&self, model: &Model, extra: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
        self.inner.refused_extra_key(model, extra)
    }

    async fn submit(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
    ) -> Result<UpstreamRef, SubmitFailure> {
        let started = Instant::now();
        let result = self.inner.submit(job_id, model, input).instrument(call_span(self.name(), "submit", job_id)).await;
        record(self.inner.name(), "submit", started, &result, submit_class);
        result
    }

    fn keys(&self) -> Vec<ProviderKey> {
        self.inner.keys()
    }

    fn key_hint(&self, upstream: &UpstreamRef) -> Option<String> {
        self.inner.key_hint(upstream)
    }

    async fn submit_as(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
        send: &SendAs,
    ) -> Result<UpstreamRef, SubmitFailure> {
        let started = Instant::now();
        let result =
            self.inner.submit_as(job_id, model, input, send).instrument(call_span(self.name(), "submit", job_id)).await;
        record(self.inner.name(), "submit", started, &result, submit_class);
        result
    }

    async fn status(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<UpstreamStatus, PollFailure> {
        let started = Instant::now();
        let result = self.inner.status(job_id, upstream).instrument(call_span(self.name(), "status", job_id)).await;
        record(self.inner.name(), "status", started, &result, poll_class);
        result
    }

    async fn result(
        &self,
        job_id: JobId,
        upstream: &UpstreamRef,
        modality: Modality,
    ) -> Result<UpstreamResult, ResultFailure> {
        let started = Instant::now();
        let result =
            self.inner.result(job_id, upstream, modality).instrument(call_span(self.name(), "result", job_id)).await;
        record(self.inner.name(), "result", started, &result, result_class);
        result
    }

    async fn cancel(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<(), PollFailure> {
        let started = Instant::now();
        let result = self.inner.cancel(job_id, upstream).instrument(call_span(self.name(), "cancel", job_id)).await;
        record(self.inner.name(), "cancel", started, &result, poll_class);
        result
    }

    async fn cancel_unless_done(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<CancelOutcome, PollFailure> {
        let started = Instant::now();
        let result =
            self.inner.cancel_unless_done(job_id, upstream).instrument(call_span(self.name(), "cancel", job_id)).await;
        record(self.inner.name(), "cancel", started, &result, poll_class);
        result
    }

    async fn read_notification(
        &self,
        delivery: &Delivery,
        now: time::OffsetDateTime,
    ) -> Result<UpstreamReport, NotificationRejected> {
        let result = self.inner.read_notification(delivery, now).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(NotificationRejected::NotEnabled) => "not_enabled",
            Err(NotificationRejected::InvalidSignature(_)) => "invalid_signature",
            Err(NotificationRejected::Malformed(_)) => "malformed",
            Err(NotificationRejected::Unavailable(_)) => "unavailable",
        };
        counter!("genjobs_upstream_notifications_total", "provider" => self.inner.name(), "outcome" => outcome)
            .increment(1);
        result
    }
}
