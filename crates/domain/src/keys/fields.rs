//! The checks of a key's fields as a request gives them, each refusal naming its field.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{BudgetPeriod, KeyBudget};
use crate::credits::Credits;
use crate::ids::ModelId;
use crate::invalid::InvalidRequest;

/// Longest key name, in characters after trimming.
pub const MAX_KEY_NAME_CHARS: usize = 200;

/// A key's name: 1 to 200 characters after trimming.
///
/// # Errors
/// [`InvalidRequest`] naming `name`.
pub fn key_name(text: &str) -> Result<String, InvalidRequest> {
    let name = text.trim();
    if name.is_empty() || name.chars().count() > MAX_KEY_NAME_CHARS {
        return Err(InvalidRequest::param(
            "name",
            format!("`name` must be a string of 1 to {MAX_KEY_NAME_CHARS} characters"),
        ));
    }
    Ok(name.to_owned())
}

/// A key's models: at least one model id (whether the catalog has each is the use case's check).
///
/// # Errors
/// [`InvalidRequest`] naming `models`.
pub fn key_models(ids: Vec<String>) -> Result<Vec<ModelId>, InvalidRequest> {
    if ids.is_empty() {
        return Err(InvalidRequest::param("models", "`models` must list at least one model id"));
    }
    Ok(ids.into_iter().map(ModelId::new).collect())
}

/// A key's budget: credits the ledger can count, a known period.
///
/// # Errors
/// [`InvalidRequest`] naming `budget`.
pub fn key_budget(credits: u64, period: &str) -> Result<KeyBudget, InvalidRequest> {
    if i64::try_from(credits).is_err() {
        return Err(InvalidRequest::param("budget", "`budget.credits` must be a non-negative integer"));
    }
    let period = BudgetPeriod::parse(period).ok_or_else(|| {
        let names: Vec<&str> = BudgetPeriod::ALL.iter().map(|p| p.as_str()).collect();
        InvalidRequest::param("budget", format!("`budget.period` must be one of {}", names.join(", ")))
    })?;
    Ok(KeyBudget { credits: Credits::new(credits), period })
}

/// A key's expiry: an RFC 3339 (ISO 8601) time, which may be in the past.
///
/// # Errors
/// [`InvalidRequest`] naming `expires_at`.
pub fn key_expiry(text: &str) -> Result<OffsetDateTime, InvalidRequest> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|_| {
        InvalidRequest::param("expires_at", "`expires_at` must be an ISO 8601 time, e.g. 2026-12-31T23:59:59Z")
    })
}

/// One of a key's limits: a positive integer.
///
/// # Errors
/// [`InvalidRequest`] naming `field`.
pub fn key_limit(field: &str, value: u64) -> Result<u32, InvalidRequest> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| InvalidRequest::param(field, format!("`{field}` must be a positive integer")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_field_refusal_names_its_field() {
        let param = |e: InvalidRequest| e.param.unwrap_or_default();
        assert_eq!(key_name(" ci ").unwrap(), "ci");
        assert_eq!(param(key_name(" ").unwrap_err()), "name");
        assert_eq!(param(key_models(Vec::new()).unwrap_err()), "models");
        assert_eq!(key_budget(5, "week").unwrap().period, BudgetPeriod::Week);
        assert_eq!(param(key_budget(5, "year").unwrap_err()), "budget");
        assert_eq!(param(key_budget(u64::MAX, "day").unwrap_err()), "budget");
        assert!(key_expiry("2026-12-31T23:59:59Z").is_ok());
        assert_eq!(param(key_expiry("tomorrow").unwrap_err()), "expires_at");
        assert_eq!(key_limit("max_concurrent_jobs", 3), Ok(3));
        assert_eq!(param(key_limit("rate_limit_per_minute", 0).unwrap_err()), "rate_limit_per_minute");
    }
}
