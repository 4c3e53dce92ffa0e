//! Keys with settings on the wire: the bodies that issue and change a key turned into the
//! domain's settings and change (each refusal naming its field), and a key's listing as the API
//! shows it.

use genjobs_api::{BudgetBody, IssuedKey, KeyBudgetView, KeyPatch, KeyView, NewKey};
use genjobs_domain::ids::ApiKey;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::keys::{
    KeyBudget, KeyChange, KeySettings, key_budget, key_expiry, key_limit, key_models, key_name,
};
use genjobs_domain::usecases::KeyListing;

use super::responses::iso;

fn budget(body: BudgetBody) -> Result<KeyBudget, InvalidRequest> {
    key_budget(body.credits, &body.period)
}

/// The settings of a new key.
///
/// # Errors
/// [`InvalidRequest`] naming the field at fault.
pub fn key_settings(body: NewKey) -> Result<KeySettings, InvalidRequest> {
    Ok(KeySettings {
        name: body.name.as_deref().map(key_name).transpose()?,
        models: body.models.map(key_models).transpose()?,
        budget: body.budget.map(budget).transpose()?,
        expires_at: body.expires_at.as_deref().map(key_expiry).transpose()?,
        rate_limit_per_minute: body.rate_limit_per_minute.map(|v| key_limit("rate_limit_per_minute", v)).transpose()?,
        max_concurrent_jobs: body.max_concurrent_jobs.map(|v| key_limit("max_concurrent_jobs", v)).transpose()?,
    })
}

/// Checks the value of one field of a change, keeping "absent" and "null" apart.
#[allow(clippy::option_option, reason = "absent and null are different requests")]
fn changed<T, U>(
    field: Option<Option<T>>,
    check: impl FnOnce(T) -> Result<U, InvalidRequest>,
) -> Result<Option<Option<U>>, InvalidRequest> {
    field.map(|value| value.map(check).transpose()).transpose()
}

/// A change to a key's settings.
///
/// # Errors
/// [`InvalidRequest`] naming the field at fault.
pub fn key_change(body: KeyPatch) -> Result<KeyChange, InvalidRequest> {
    Ok(KeyChange {
        name: changed(body.name, |name: String| key_name(&name))?,
        models: changed(body.models, key_models)?,
        budget: changed(body.budget, budget)?,
        expires_at: changed(body.expires_at, |at: String| key_expiry(&at))?,
        rate_limit_per_minute: changed(body.rate_limit_per_minute, |v| key_limit("rate_limit_per_minute", v))?,
        max_concurrent_jobs: changed(body.max_concurrent_jobs, |v| key_limit("max_concurrent_jobs", v))?,
    })
}

/// A key as its listing shows it.
#[must_use]
pub fn key_view(listing: &KeyListing) -> KeyView {
    let KeyListing { record, budget } = listing;
    let settings = &record.settings;
    KeyView {
        prefix: record.prefix.as_str().to_owned(),
        parent: record.parent.as_ref().map(|parent| parent.as_str().to_owned()),
        name: settings.name.clone(),
        models: settings.models.as_ref().map(|models| models.iter().map(|m| m.as_str().to_owned()).collect()),
        budget: budget.map(|standing| KeyBudgetView {
            credits: standing.budget.credits.get(),
            period: standing.budget.period.as_str().to_owned(),
            used: standing.used.get(),
            resets_at: standing.resets_at.map(iso),
        }),
        expires_at: settings.expires_at.map(iso),
        rate_limit_per_minute: settings.rate_limit_per_minute,
        max_concurrent_jobs: settings.max_concurrent_jobs,
        created_at: iso(record.created_at),
        last_used_at: record.last_used_at.map(iso),
        revoked_at: record.revoked_at.map(iso),
    }
}

/// A key just issued, shown this once.
#[must_use]
pub fn issued_key_view(key: &ApiKey, listing: &KeyListing) -> IssuedKey {
    IssuedKey { api_key: key.expose().to_owned(), key: key_view(listing) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_keeps_absent_fields_and_removes_null_ones() {
        let patch: KeyPatch =
            serde_json::from_value(serde_json::json!({"name": null, "max_concurrent_jobs": 2})).unwrap();
        let change = key_change(patch).unwrap();
        assert_eq!(change.name, Some(None));
        assert_eq!(change.max_concurrent_jobs, Some(Some(2)));
        assert_eq!(change.budget, None);
    }

    #[test]
    fn bad_settings_name_their_field() {
        let bad = NewKey { expires_at: Some("soon".into()), ..NewKey::default() };
        assert_eq!(key_settings(bad).unwrap_err().param.as_deref(), Some("expires_at"));
        let bad = NewKey { budget: Some(BudgetBody { credits: 5, period: "year".into() }), ..NewKey::default() };
        assert_eq!(key_settings(bad).unwrap_err().param.as_deref(), Some("budget"));
    }
}
