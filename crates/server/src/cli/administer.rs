//! The administration subcommands against the store at `DATABASE_URL`: `migrate`,
//! `admin-token`, `users create|grant`, the operator's `keys`, `models export|apply`.

use std::fmt::Write as _;

use genjobs_domain::catalog::{CatalogFile, ModelDocument};
use genjobs_domain::ids::UserId;
use genjobs_domain::usecases::{NewUserRequest, PlannedChange};

use super::{CatalogCommand, Command, ModelsCommand, UsersCommand};
use crate::cli_error::CliError;
use crate::remote::counted;
use crate::{Config, StartError, admin};

/// Runs an administration subcommand and returns what it prints.
///
/// # Errors
/// See [`CliError`].
pub async fn administer(config: &Config, command: &Command) -> Result<String, CliError> {
    let name = match command {
        Command::Migrate(_) => "migrate",
        Command::AdminToken(_) => "admin-token",
        Command::Users(UsersCommand::Create { .. }) => "users create",
        Command::Users(UsersCommand::Grant { .. }) => "users grant",
        Command::Keys(command) => command.name(),
        Command::Models(ModelsCommand { catalog: Some(CatalogCommand::Export { .. }), .. }) => "models export",
        Command::Models(ModelsCommand { catalog: Some(CatalogCommand::Apply { .. }), .. }) => "models apply",
        _ => return Err(CliError::Invalid("not an administration command".into())),
    };
    let Some(pg) = config.postgres_settings() else { return Err(CliError::NoDatabase(name)) };
    match command {
        Command::AdminToken(_) => Ok(format!("admin token: {}", crate::new_admin_token(config).await?)),
        Command::Keys(command) => crate::keys_cli::run(&admin(config).await?, command).await,
        Command::Users(UsersCommand::Create { name, credits, .. }) => {
            // The API's own checks, so that the command line refuses what the API refuses.
            let request = NewUserRequest::validate(name, *credits, None, None, None)
                .map_err(|e| CliError::Invalid(format!("--{}: {}", e.param.as_deref().unwrap_or("name"), e.message)))?;
            let (account, key) =
                admin(config).await?.create_user(request).await.map_err(|e| CliError::Failed(e.to_string()))?;
            Ok(format!(
                "user {} created with {} credits\napi key: {}",
                account.user_id,
                account.balances.available,
                key.expose()
            ))
        }
        Command::Users(UsersCommand::Grant { id, amount, .. }) => {
            let id = UserId::parse(id).map_err(|e| CliError::Invalid(e.to_string()))?;
            let account = admin(config).await?.grant(id, *amount).await.map_err(|e| CliError::Failed(e.to_string()))?;
            Ok(format!("user {} now has {} credits available", account.user_id, account.balances.available))
        }
        Command::Models(ModelsCommand { catalog: Some(CatalogCommand::Export { .. }), .. }) => {
            let admin = admin(config).await?;
            let models = admin.catalog().managed().map(genjobs_domain::catalog::Model::document).collect();
            Ok(CatalogFile { models }.write().trim_end().to_owned())
        }
        Command::Models(ModelsCommand { catalog: Some(CatalogCommand::Apply { file, dry_run, .. }), .. }) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| CliError::Invalid(format!("cannot read {}: {e}", file.display())))?;
            let catalog =
                CatalogFile::read(&text).map_err(|e| CliError::Invalid(format!("{}: {e}", file.display())))?;
            let admin = admin(config).await?;
            let plan = admin.plan_catalog(catalog.models).await.map_err(|e| match e {
                genjobs_domain::usecases::CatalogAdminError::Invalid(e) => {
                    CliError::Invalid(format!("{}: {}: {}", file.display(), e.param.unwrap_or_default(), e.message))
                }
                other => CliError::Failed(other.to_string()),
            })?;
            let mut shown = render_plan(&plan);
            if plan.is_empty() {
                shown.push_str("the catalog already matches the file");
            } else if *dry_run {
                let _ = write!(shown, "dry run: {} not applied", counted(plan.len(), "change"));
            } else {
                admin.apply_catalog(&plan).await.map_err(|e| CliError::Failed(e.to_string()))?;
                let _ = write!(shown, "{} applied", counted(plan.len(), "change"));
            }
            Ok(shown)
        }
        _ => {
            let applied = genjobs_store_postgres::run_migrations(&pg).await.map_err(StartError::from)?;
            Ok(format!("{} applied", counted(applied, "migration")))
        }
    }
}

/// Each planned change as a unified diff of the documents' JSON.
fn render_plan(plan: &[PlannedChange]) -> String {
    let pretty = |document: Option<&ModelDocument>| {
        document.map(|d| serde_json::to_string_pretty(&d.to_value()).unwrap_or_default() + "\n").unwrap_or_default()
    };
    let mut shown = String::new();
    for change in plan {
        let what = match (&change.before, &change.after) {
            (None, _) => "added",
            (_, None) => "deleted",
            _ => "changed",
        };
        let (before, after) = (pretty(change.before.as_ref()), pretty(change.after.as_ref()));
        let diff = similar::TextDiff::from_lines(&before, &after);
        let id = change.id.to_string();
        let _ = writeln!(shown, "{id}: {what}");
        let _ = write!(
            shown,
            "{}",
            diff.unified_diff().context_radius(2).header(&format!("stored/{id}"), &format!("file/{id}"))
        );
    }
    shown
}
