//! A key's settings as the columns of `api_keys` keep them: each null when the key has no
//! restriction of that kind; a budget is its credits and its period, both or neither.

use diesel::prelude::*;
use genjobs_domain::ids::ModelId;
use genjobs_domain::keys::{BudgetPeriod, KeyBudget, KeySettings};
use genjobs_domain::ports::StoreError;
use time::OffsetDateTime;

use super::{amount, corrupt, credits};
use crate::schema::api_keys;

/// The settings columns of a key, read, inserted or written whole (a null removes a setting).
#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = api_keys, check_for_backend(diesel::pg::Pg), treat_none_as_null = true)]
pub(crate) struct KeySettingsRow {
    name: Option<String>,
    models: Option<Vec<Option<String>>>,
    budget_credits: Option<i64>,
    budget_period: Option<String>,
    expires_at: Option<OffsetDateTime>,
    rate_limit_per_minute: Option<i32>,
    max_concurrent_jobs: Option<i32>,
}

fn limit_column(value: Option<u32>) -> Option<i32> {
    value.map(|v| i32::try_from(v).unwrap_or(i32::MAX))
}

fn limit_value(what: &str, value: Option<i32>) -> Result<Option<u32>, StoreError> {
    value.map(|v| u32::try_from(v).map_err(|e| corrupt(what, e))).transpose()
}

impl KeySettingsRow {
    pub(crate) fn of(settings: &KeySettings) -> Result<Self, StoreError> {
        Ok(Self {
            name: settings.name.clone(),
            models: settings
                .models
                .as_ref()
                .map(|models| models.iter().map(|model| Some(model.as_str().to_owned())).collect()),
            budget_credits: settings.budget.map(|budget| amount(budget.credits)).transpose()?,
            budget_period: settings.budget.map(|budget| budget.period.as_str().to_owned()),
            expires_at: settings.expires_at,
            rate_limit_per_minute: limit_column(settings.rate_limit_per_minute),
            max_concurrent_jobs: limit_column(settings.max_concurrent_jobs),
        })
    }

    pub(crate) fn into_settings(self) -> Result<KeySettings, StoreError> {
        let budget = match (self.budget_credits, self.budget_period) {
            (Some(credits_value), Some(period)) => Some(KeyBudget {
                credits: credits(credits_value)?,
                period: BudgetPeriod::parse(&period).ok_or_else(|| corrupt("budget period", &period))?,
            }),
            (None, None) => None,
            _ => return Err(corrupt("budget", "credits without a period, or a period without credits")),
        };
        Ok(KeySettings {
            name: self.name,
            models: self.models.map(|models| models.into_iter().flatten().map(ModelId::new).collect()),
            budget,
            expires_at: self.expires_at,
            rate_limit_per_minute: limit_value("rate_limit_per_minute", self.rate_limit_per_minute)?,
            max_concurrent_jobs: limit_value("max_concurrent_jobs", self.max_concurrent_jobs)?,
        })
    }
}
