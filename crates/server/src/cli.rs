//! The operator subcommands against `DATABASE_URL`: `migrate`, `users create`, `users grant`.

use genjobs_domain::credits::Credits;
use genjobs_domain::ids::UserId;
use genjobs_domain::usecases::NewUserRequest;

use crate::{Config, StartError, gateway};

/// What a subcommand prints.
pub type Output = String;

/// A subcommand that failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The words are not a known subcommand.
    #[error("usage: genjobs [serve] | migrate | users create --name N --credits C | users grant --id ID --amount A")]
    Usage,
    /// The subcommand needs `DATABASE_URL`.
    #[error("`{0}` works against DATABASE_URL, which is not set")]
    NoDatabase(&'static str),
    /// A flag's value is not valid.
    #[error("{0}")]
    Invalid(String),
    /// The store could not be set up.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The operation failed.
    #[error("{0}")]
    Failed(String),
}

fn flag<'a>(args: &'a [String], name: &str) -> Result<&'a str, CliError> {
    args.windows(2)
        .find(|pair| pair[0] == name)
        .map(|pair| pair[1].as_str())
        .ok_or_else(|| CliError::Invalid(format!("missing {name}")))
}

fn number<T: std::str::FromStr>(args: &[String], name: &str) -> Result<T, CliError> {
    flag(args, name)?.parse().map_err(|_| CliError::Invalid(format!("{name} must be an integer")))
}

/// Runs an operator subcommand (`args` without the program name).
///
/// # Errors
/// See [`CliError`].
pub async fn run(config: &Config, args: &[String]) -> Result<Output, CliError> {
    let words: Vec<&str> = args.iter().take(2).map(String::as_str).collect();
    let command: &'static str = match words.as_slice() {
        ["migrate", ..] => "migrate",
        ["users", "create"] => "users create",
        ["users", "grant"] => "users grant",
        _ => return Err(CliError::Usage),
    };
    let Some(pg) = config.postgres_settings() else { return Err(CliError::NoDatabase(command)) };
    match command {
        "migrate" => {
            let applied = genjobs_store_postgres::run_migrations(&pg).await.map_err(StartError::from)?;
            Ok(format!("{applied} migrations applied"))
        }
        "users create" => {
            let request = NewUserRequest {
                name: flag(args, "--name")?.to_owned(),
                credits: Credits::new(number(args, "--credits")?),
                rate_limit_per_minute: None,
                max_concurrent_jobs: None,
            };
            let (account, key) =
                gateway(config).await?.create_user(request).await.map_err(|e| CliError::Failed(e.to_string()))?;
            Ok(format!(
                "user {} created with {} credits\napi key: {}",
                account.user_id,
                account.balances.available,
                key.expose()
            ))
        }
        _ => {
            let id = UserId::parse(flag(args, "--id")?).map_err(|e| CliError::Invalid(e.to_string()))?;
            let account = gateway(config)
                .await?
                .grant(id, number(args, "--amount")?)
                .await
                .map_err(|e| CliError::Failed(e.to_string()))?;
            Ok(format!("user {} now has {} credits available", account.user_id, account.balances.available))
        }
    }
}
