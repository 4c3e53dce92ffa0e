//! `genjobs keys create|list|revoke|set`: an operator's keys with settings, against the store at
//! `DATABASE_URL`, through the same use cases (and the same checks) as the admin API.

use std::fmt::Write as _;

use clap::{Args, Subcommand};
use genjobs_domain::ids::UserId;
use genjobs_domain::keys::{KeyChange, KeySettings, key_budget, key_expiry, key_limit, key_models, key_name};
use genjobs_domain::request::InvalidRequest;
use genjobs_domain::usecases::{Admin, KeyListing};

use crate::cli::CliError;
use crate::config::ConfigArgs;

/// A key's settings as flags; each optional.
#[derive(Debug, Clone, Default, Args)]
pub struct KeyFlags {
    /// A name for the people who manage it.
    #[arg(long)]
    pub name: Option<String>,
    /// The model ids it may use, comma-separated (`--models` names the catalog file).
    #[arg(long = "allowed-models", id = "allowed_models", value_delimiter = ',')]
    pub models: Option<Vec<String>>,
    /// Credits it may hold plus spend per --period.
    #[arg(long, requires = "period")]
    pub budget: Option<u64>,
    /// The budget's period: day, week, month (UTC) or total.
    #[arg(long, requires = "budget")]
    pub period: Option<String>,
    /// When it stops working (ISO 8601).
    #[arg(long)]
    pub expires_at: Option<String>,
    /// Requests per minute, in addition to its user's.
    #[arg(long)]
    pub rate_limit_per_minute: Option<u64>,
    /// Jobs not yet final at once, in addition to its user's.
    #[arg(long)]
    pub max_concurrent_jobs: Option<u64>,
}

/// A subcommand of `genjobs keys`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Issue a user a key with settings and print it (shown only here).
    Create {
        /// The user's id.
        #[arg(long)]
        user: String,
        /// The key's settings.
        #[command(flatten)]
        flags: KeyFlags,
        /// The service's settings (DATABASE_URL).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// List a user's keys, revoked ones too.
    List {
        /// The user's id.
        #[arg(long)]
        user: String,
        /// The service's settings (DATABASE_URL).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// Revoke a key: it stops working at once.
    Revoke {
        /// The key's prefix (or the whole key).
        #[arg(long)]
        prefix: String,
        /// The service's settings (DATABASE_URL).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// Change a key's settings: the flags given set, `--clear` removes, the rest stay.
    Set {
        /// The key's prefix (or the whole key).
        #[arg(long)]
        prefix: String,
        /// The settings to set.
        #[command(flatten)]
        flags: KeyFlags,
        /// Settings to remove, comma-separated: name, models, budget, expires_at,
        /// rate_limit_per_minute, max_concurrent_jobs.
        #[arg(long, value_delimiter = ',')]
        clear: Vec<String>,
        /// The service's settings (DATABASE_URL).
        #[command(flatten)]
        settings: ConfigArgs,
    },
}

impl KeysCommand {
    /// The service settings it was given.
    #[must_use]
    pub fn settings(&self) -> &ConfigArgs {
        match self {
            Self::Create { settings, .. }
            | Self::List { settings, .. }
            | Self::Revoke { settings, .. }
            | Self::Set { settings, .. } => settings,
        }
    }

    /// Its name in messages.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Create { .. } => "keys create",
            Self::List { .. } => "keys list",
            Self::Revoke { .. } => "keys revoke",
            Self::Set { .. } => "keys set",
        }
    }
}

fn invalid(e: InvalidRequest) -> CliError {
    CliError::Invalid(format!("--{}: {}", e.param.unwrap_or_default().replace('_', "-"), e.message))
}

fn user(id: &str) -> Result<UserId, CliError> {
    UserId::parse(id).map_err(|e| CliError::Invalid(e.to_string()))
}

/// The change the flags make: each flag given sets its field, each of `clear` removes one.
fn change(flags: &KeyFlags, clear: &[String]) -> Result<KeyChange, CliError> {
    let mut change = KeyChange {
        name: flags.name.as_deref().map(key_name).transpose().map_err(invalid)?.map(Some),
        models: flags.models.clone().map(key_models).transpose().map_err(invalid)?.map(Some),
        budget: match (flags.budget, flags.period.as_deref()) {
            (Some(credits), Some(period)) => Some(Some(key_budget(credits, period).map_err(invalid)?)),
            _ => None,
        },
        expires_at: flags.expires_at.as_deref().map(key_expiry).transpose().map_err(invalid)?.map(Some),
        rate_limit_per_minute: flags
            .rate_limit_per_minute
            .map(|v| key_limit("rate_limit_per_minute", v))
            .transpose()
            .map_err(invalid)?
            .map(Some),
        max_concurrent_jobs: flags
            .max_concurrent_jobs
            .map(|v| key_limit("max_concurrent_jobs", v))
            .transpose()
            .map_err(invalid)?
            .map(Some),
    };
    for field in clear {
        match field.as_str() {
            "name" => change.name = Some(None),
            "models" => change.models = Some(None),
            "budget" => change.budget = Some(None),
            "expires_at" => change.expires_at = Some(None),
            "rate_limit_per_minute" => change.rate_limit_per_minute = Some(None),
            "max_concurrent_jobs" => change.max_concurrent_jobs = Some(None),
            other => return Err(CliError::Invalid(format!("--clear: no setting `{other}`"))),
        }
    }
    Ok(change)
}

/// One key as a line: its prefix, then each setting it has.
fn line(listing: &KeyListing) -> String {
    let (record, settings) = (&listing.record, &listing.record.settings);
    let mut line = record.prefix.to_string();
    if let Some(name) = &settings.name {
        let _ = write!(line, " name={name}");
    }
    if let Some(models) = &settings.models {
        let models: Vec<&str> = models.iter().map(|m| m.as_str()).collect();
        let _ = write!(line, " models={}", models.join(","));
    }
    if let Some(standing) = &listing.budget {
        let _ = write!(
            line,
            " budget={}/{} used={}",
            standing.budget.credits,
            standing.budget.period.as_str(),
            standing.used
        );
    }
    if let Some(at) = settings.expires_at {
        let _ = write!(line, " expires_at={at}");
    }
    if let Some(rate) = settings.rate_limit_per_minute {
        let _ = write!(line, " rate_limit_per_minute={rate}");
    }
    if let Some(jobs) = settings.max_concurrent_jobs {
        let _ = write!(line, " max_concurrent_jobs={jobs}");
    }
    if record.revoked_at.is_some() {
        line.push_str(" revoked");
    }
    line
}

/// Runs `command` with `admin`; what it prints.
///
/// # Errors
/// [`CliError::Invalid`] for a flag's value, [`CliError::Failed`] when the use case refuses.
pub async fn run(admin: &Admin, command: &KeysCommand) -> Result<String, CliError> {
    let failed = |e: genjobs_domain::usecases::AdminError| CliError::Failed(e.to_string());
    match command {
        KeysCommand::Create { user: id, flags, .. } => {
            let settings = change(flags, &[])?.apply(&KeySettings::default());
            let (key, listing) = admin.issue_key(user(id)?, settings).await.map_err(failed)?;
            Ok(format!("{}\napi key: {}", line(&listing), key.expose()))
        }
        KeysCommand::List { user: id, .. } => {
            let keys = admin.keys_of(user(id)?).await.map_err(failed)?;
            Ok(keys.iter().map(line).collect::<Vec<_>>().join("\n"))
        }
        KeysCommand::Revoke { prefix, .. } => {
            admin.revoke_key(prefix).await.map_err(failed)?;
            Ok(format!("key {prefix} revoked"))
        }
        KeysCommand::Set { prefix, flags, clear, .. } => {
            let listing = admin.change_key(prefix, &change(flags, clear)?).await.map_err(failed)?;
            Ok(line(&listing))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_set_and_clear_name_their_setting() {
        let flags = KeyFlags { budget: Some(5), period: Some("week".into()), ..KeyFlags::default() };
        let made = change(&flags, &["name".into()]).unwrap();
        assert!(made.budget.is_some_and(|b| b.is_some()));
        assert_eq!(made.name, Some(None));
        assert!(change(&flags, &["colour".into()]).is_err());
        let bad = KeyFlags { budget: Some(5), period: Some("year".into()), ..KeyFlags::default() };
        assert!(matches!(change(&bad, &[]), Err(CliError::Invalid(message)) if message.starts_with("--budget")));
    }
}
