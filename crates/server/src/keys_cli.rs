//! `genjobs keys create|list|revoke|set`, in two modes chosen by `DATABASE_URL`:
//! - set: an operator's, on any user's keys in the store there, through the same use cases (and
//!   the same checks) as the admin API ([`run`]);
//! - unset: a user's, on their own keys through `/api/v1/account/keys` with `GENJOBS_API_KEY`
//!   (`remote::keys`). The API has no user-side change of a key, so `keys set` is refused there:
//!   a user revokes the key and creates another, which the service checks is no wider than theirs.
//!
//! Both modes check the flags alike and print a key as the same line (or, with `--json`, as the
//! API shows it).

use std::fmt::Write as _;

use clap::{Args, Subcommand};
use genjobs_client::{BudgetBody, IssuedKey, KeyView, NewKey};
use genjobs_domain::ids::UserId;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::keys::{KeyChange, key_budget, key_expiry, key_limit, key_models, key_name};
use genjobs_domain::usecases::Admin;
use genjobs_http::dto::keys::{issued_key_view, key_settings, key_view};

use crate::cli_error::CliError;
use crate::config::ConfigArgs;
use crate::connection::Connection;

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
    /// Issue a key with settings and print it (shown only here): yourself one no wider than
    /// GENJOBS_API_KEY, or, as an operator, a user one.
    #[command(mut_arg("api_key", |arg| arg.required(false)))]
    Create {
        /// The user's id (operators only).
        #[arg(long)]
        user: Option<String>,
        /// The key's settings.
        #[command(flatten)]
        flags: KeyFlags,
        /// Where the service is and who calls (your own keys).
        #[command(flatten)]
        connection: Connection,
        /// The service's settings (DATABASE_URL, operators).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// List keys, revoked ones too: yours, or, as an operator, a user's.
    #[command(mut_arg("api_key", |arg| arg.required(false)))]
    List {
        /// The user's id (operators only).
        #[arg(long)]
        user: Option<String>,
        /// Where the service is and who calls (your own keys).
        #[command(flatten)]
        connection: Connection,
        /// The service's settings (DATABASE_URL, operators).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// Revoke a key: it stops working at once.
    #[command(mut_arg("api_key", |arg| arg.required(false)))]
    Revoke {
        /// The key's prefix (or the whole key).
        #[arg(long)]
        prefix: String,
        /// Where the service is and who calls (your own keys).
        #[command(flatten)]
        connection: Connection,
        /// The service's settings (DATABASE_URL, operators).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// Change a key's settings (operators only: users revoke a key and create another): the
    /// flags given set, `--clear` removes, the rest stay.
    #[command(mut_arg("api_key", |arg| arg.required(false)))]
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
        /// Where the service is and who calls (your own keys).
        #[command(flatten)]
        connection: Connection,
        /// The service's settings (DATABASE_URL, operators).
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

    /// Where the service is and who calls, for a user's own keys.
    #[must_use]
    pub fn connection(&self) -> &Connection {
        match self {
            Self::Create { connection, .. }
            | Self::List { connection, .. }
            | Self::Revoke { connection, .. }
            | Self::Set { connection, .. } => connection,
        }
    }

    /// Whether it works as an operator, on the store at `DATABASE_URL`; otherwise it manages the
    /// caller's own keys through the API.
    #[must_use]
    pub fn is_operator(&self) -> bool {
        self.settings().database_url.is_some()
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

/// The flag that sets a field the API names `param`.
fn flag(param: &str) -> String {
    match param {
        "models" => "allowed-models".to_owned(),
        other => other.replace('_', "-"),
    }
}

/// A field's refusal as a usage error naming its flag.
fn invalid(e: InvalidRequest) -> CliError {
    CliError::Invalid(format!("--{}: {}", flag(&e.param.unwrap_or_default()), e.message))
}

fn user(id: &str) -> Result<UserId, CliError> {
    UserId::parse(id).map_err(|e| CliError::Invalid(e.to_string()))
}

/// The body that issues a key with the settings of `flags`, each checked as the service checks
/// it (all but whether the models exist, which only the service knows).
///
/// # Errors
/// [`CliError::Invalid`] naming the flag at fault.
pub(crate) fn new_key(flags: &KeyFlags) -> Result<NewKey, CliError> {
    let body = NewKey {
        name: flags.name.clone(),
        models: flags.models.clone(),
        budget: flags.budget.zip(flags.period.clone()).map(|(credits, period)| BudgetBody { credits, period }),
        expires_at: flags.expires_at.clone(),
        rate_limit_per_minute: flags.rate_limit_per_minute,
        max_concurrent_jobs: flags.max_concurrent_jobs,
    };
    key_settings(body.clone()).map_err(invalid)?;
    Ok(body)
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

/// One key as a line, in both modes: its prefix, then each setting it has.
pub(crate) fn line(key: &KeyView) -> String {
    let mut line = key.prefix.clone();
    if let Some(name) = &key.name {
        let _ = write!(line, " name={name}");
    }
    if let Some(models) = &key.models {
        let _ = write!(line, " models={}", models.join(","));
    }
    if let Some(budget) = &key.budget {
        let _ = write!(line, " budget={}/{} used={}", budget.credits, budget.period, budget.used);
    }
    if let Some(at) = &key.expires_at {
        let _ = write!(line, " expires_at={at}");
    }
    if let Some(rate) = key.rate_limit_per_minute {
        let _ = write!(line, " rate_limit_per_minute={rate}");
    }
    if let Some(jobs) = key.max_concurrent_jobs {
        let _ = write!(line, " max_concurrent_jobs={jobs}");
    }
    if key.revoked_at.is_some() {
        line.push_str(" revoked");
    }
    line
}

/// A key just issued as both modes print it: its line, then the key.
pub(crate) fn issued(key: &IssuedKey) -> String {
    format!("{}\napi key: {}", line(&key.key), key.api_key)
}

/// What a command prints: `document` with `--json`, else `text`.
fn printed(json: bool, document: serde_json::Value, text: String) -> String {
    if json { document.to_string() } else { text }
}

/// Runs `command` as an operator, with `admin`; what it prints.
///
/// # Errors
/// [`CliError::Invalid`] for a flag's value or a missing `--user`, [`CliError::Failed`] when
/// the use case refuses.
pub async fn run(admin: &Admin, command: &KeysCommand) -> Result<String, CliError> {
    let failed = |e: genjobs_domain::usecases::AdminError| CliError::Failed(e.to_string());
    let needs_user = |id: Option<&str>| {
        id.map(user).unwrap_or_else(|| {
            Err(CliError::Invalid(format!(
                "`{}` with DATABASE_URL set works on a user's keys: name the user with --user \
                 (without DATABASE_URL, it works on your own keys through the API)",
                command.name()
            )))
        })
    };
    let json = command.connection().json;
    match command {
        KeysCommand::Create { user: id, flags, .. } => {
            let id = needs_user(id.as_deref())?;
            let settings = key_settings(new_key(flags)?).map_err(invalid)?;
            let (key, listing) = admin.issue_key(id, settings).await.map_err(failed)?;
            let key = issued_key_view(&key, &listing);
            Ok(printed(json, serde_json::json!(key), issued(&key)))
        }
        KeysCommand::List { user: id, .. } => {
            let keys: Vec<KeyView> =
                admin.keys_of(needs_user(id.as_deref())?).await.map_err(failed)?.iter().map(key_view).collect();
            let text = keys.iter().map(line).collect::<Vec<_>>().join("\n");
            Ok(printed(json, serde_json::json!({ "data": keys }), text))
        }
        KeysCommand::Revoke { prefix, .. } => {
            admin.revoke_key(prefix).await.map_err(failed)?;
            Ok(printed(json, serde_json::json!({ "revoked": prefix }), format!("key {prefix} revoked")))
        }
        KeysCommand::Set { prefix, flags, clear, .. } => {
            let key = key_view(&admin.change_key(prefix, &change(flags, clear)?).await.map_err(failed)?);
            Ok(printed(json, serde_json::json!(key), line(&key)))
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
