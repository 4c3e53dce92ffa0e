//! A request's result response read into the port's terms: its outputs, or why it failed, and
//! the units fal bills for it (`x-fal-billable-units`), which a failed request may carry too.

use genjobs_domain::decimal::Decimal;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{ReportedUsage, ResultFailure, UpstreamResult};
use reqwest::StatusCode;
use serde_json::Value;

use crate::BILLABLE_UNITS_HEADER;
use crate::errors::{FalError, is_refusal};
use crate::outputs::parse_outputs;
use crate::retry::{Read, says_later};

/// fal deletes a result of 10 KB or more 6 minutes after the request completes; a result asked
/// for after that is gone for good.
pub(crate) const EXPIRED: &str =
    "the result expired at the provider before it could be fetched (fal keeps results for 6 minutes)";

/// The units fal's header says it bills; `None` when absent, or not a decimal of at least 0.
pub(crate) fn billable_units(read: &Read) -> Option<Decimal> {
    let value = read.headers.get(BILLABLE_UNITS_HEADER)?;
    value.to_str().ok()?.trim().parse::<Decimal>().ok().filter(|units| !units.is_negative())
}

/// The result a response gives: its outputs with `usage`, or why there are none.
pub(crate) fn result_of(
    read: &Read,
    modality: Modality,
    usage: ReportedUsage,
) -> Result<UpstreamResult, ResultFailure> {
    let status = read.status;
    if status.is_success() {
        let body: Value =
            serde_json::from_slice(&read.body).map_err(|_| ResultFailure::Invalid("the result is not JSON".into()))?;
        let outputs = parse_outputs(&body, modality).map_err(ResultFailure::Invalid)?;
        return Ok(UpstreamResult { outputs, usage });
    }
    if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
        return Err(ResultFailure::Failed(EXPIRED.into()));
    }
    if says_later(read) {
        return Err(ResultFailure::Transient(format!("result call answered HTTP {}", status.as_u16())));
    }
    let error = FalError::of_read(read);
    let explained = error.detail.is_some() || error.error_type.is_some();
    match status {
        _ if error.content_refused => Err(ResultFailure::ContentRefused(error.message())),
        StatusCode::UNPROCESSABLE_ENTITY => Err(ResultFailure::Rejected(error.message())),
        _ if is_refusal(error.error_type.as_deref()) => Err(ResultFailure::Rejected(error.message())),
        s if s.is_server_error() && !explained => {
            Err(ResultFailure::Transient(format!("result call answered HTTP {}", s.as_u16())))
        }
        _ => Err(ResultFailure::Failed(error.message())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use reqwest::header::{HeaderMap, HeaderValue};
    use serde_json::json;

    use super::*;

    fn read(status: u16, units: Option<&'static str>, body: &Value) -> Read {
        let mut headers = HeaderMap::new();
        if let Some(units) = units {
            headers.insert(BILLABLE_UNITS_HEADER, HeaderValue::from_static(units));
        }
        Read { status: StatusCode::from_u16(status).unwrap(), headers, body: serde_json::to_vec(body).unwrap() }
    }

    #[test]
    fn a_failed_result_keeps_the_units_fal_billed_for_it() {
        let crashed = read(500, Some("2"), &json!({"detail": "CUDA out of memory"}));
        let usage = ReportedUsage { billable_units: billable_units(&crashed), compute_seconds: None };
        assert_eq!(usage.billable_units, Some(Decimal::whole(2)));
        let Err(ResultFailure::Billed { failure, usage: billed }) =
            result_of(&crashed, Modality::Image, usage).map_err(|failure| failure.billed(usage))
        else {
            panic!("not billed");
        };
        assert!(matches!(*failure, ResultFailure::Failed(ref reason) if reason.contains("CUDA")), "{failure:?}");
        assert_eq!(billed, usage);
        assert_eq!(billable_units(&read(500, Some("-1"), &json!({}))), None, "never below 0");
        assert_eq!(billable_units(&read(500, None, &json!({}))), None);
    }

    #[test]
    fn a_transient_answer_bills_nothing() {
        let busy = read(502, Some("2"), &json!({}));
        let usage = ReportedUsage { billable_units: billable_units(&busy), compute_seconds: None };
        let failure = result_of(&busy, Modality::Image, usage).map_err(|failure| failure.billed(usage));
        assert!(matches!(failure, Err(ResultFailure::Transient(_))), "{failure:?}");
    }
}
