//! The command line: `genjobs [serve]` serves; `migrate`, `users create`, `users grant`,
//! `keys create|list|revoke|set` (`keys_cli`) when `DATABASE_URL` is set, `models export` and
//! `models apply` administer the store at `DATABASE_URL`; `models import`
//! drafts a model document from a provider's schema genjobs holds; `config` prints the effective
//! configuration, secrets masked; `image`, `video`, `jobs`, `models`, `account`, and `keys`
//! without `DATABASE_URL`, are the API's client (`remote`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, Parser, Subcommand};
use genjobs_domain::catalog::{CatalogFile, ModelDocument};
use genjobs_domain::ids::UserId;
use genjobs_domain::usecases::{NewUserRequest, PlannedChange};

use crate::config::ConfigArgs;
use crate::keys_cli::KeysCommand;
use crate::remote;
use crate::{Config, StartError, admin};

/// `genjobs`: the gateway for asynchronous image and video generation.
#[derive(Debug, Parser)]
#[command(name = "genjobs", version, max_term_width = 110)]
#[command(about = "genjobs: the gateway for asynchronous image and video generation")]
#[command(after_help = "Without a command, genjobs serves with the settings above.")]
pub struct Cli {
    /// The service's settings, when serving without a command.
    #[command(flatten)]
    pub settings: ConfigArgs,
    /// What to do; serving when absent.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// A subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API and drive jobs (the default).
    Serve(ConfigArgs),
    /// Apply pending migrations to DATABASE_URL.
    Migrate(ConfigArgs),
    /// Create users or grant credits in DATABASE_URL.
    #[command(subcommand)]
    Users(UsersCommand),
    /// Issue, list, revoke or change API keys (models, budget, expiry, limits): your own through
    /// the API with GENJOBS_API_KEY; any user's, as an operator, when DATABASE_URL is set.
    #[command(subcommand)]
    #[command(after_help = KEYS_MODES)]
    Keys(KeysCommand),
    /// Print the effective configuration, secrets masked.
    Config(ConfigArgs),
    /// Make a new admin token in place of the one the first start over DATABASE_URL generated:
    /// printed once, its hash kept; replicas take it when they next start.
    AdminToken(ConfigArgs),
    /// Print the configuration reference's tables, made from these flags, or write them into a
    /// Markdown file (`cargo xtask config-table`: docs/configuration.md).
    #[command(hide = true)]
    ConfigTable {
        /// The file to write them into, between its config-table markers.
        #[arg(long, alias = "readme")]
        file: Option<PathBuf>,
    },
    /// Generate images: submit, follow with a progress bar, download into --out.
    Image(remote::ImageArgs),
    /// Generate a video: submit, follow with a progress bar, download into --out.
    Video(remote::VideoArgs),
    /// List, read, follow or cancel your jobs.
    #[command(subcommand)]
    Jobs(remote::JobsCommand),
    /// Your webhook secret, and a job's webhook deliveries.
    #[command(subcommand)]
    Webhooks(remote::WebhooksCommand),
    /// List the models and their form fields; or manage the catalog (export, apply, import).
    Models(ModelsCommand),
    /// Your credits and limits.
    Account(remote::AccountArgs),
    /// Your credit movements, newest first.
    Ledger(remote::LedgerArgs),
    /// Your jobs and credits spent by day or model.
    Usage(remote::UsageArgs),
}

/// How `genjobs keys` picks its mode.
const KEYS_MODES: &str = "Two modes, chosen by DATABASE_URL:
  unset: your own keys, through the API at GENJOBS_API_URL with GENJOBS_API_KEY; a new key is no
         wider than that one; `set` is refused (revoke the key and create another).
  set:   as an operator, any user's keys in that database (`create` and `list` take --user).";

/// `genjobs models [export | apply | import]`: without a subcommand, the API's model list.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ModelsCommand {
    /// Manage the catalog instead of listing it.
    #[command(subcommand)]
    pub catalog: Option<CatalogCommand>,
    /// The list's options.
    #[command(flatten)]
    pub list: remote::ModelsArgs,
}

/// `genjobs models export | apply | import`
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Print the catalog in DATABASE_URL as a catalog file: `genjobs models export > catalog.json`.
    Export {
        /// The service's settings (DATABASE_URL).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// Make the catalog in DATABASE_URL what FILE says (models it lacks are deleted): shows the
    /// difference, then applies it in one transaction.
    Apply {
        /// A catalog file, as `export` writes it.
        file: PathBuf,
        /// Show the difference only.
        #[arg(long)]
        dry_run: bool,
        /// The service's settings (DATABASE_URL).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// Print a draft model document for one of a provider's endpoints, from the endpoint schemas
    /// genjobs holds (no network): edit it, set its price, and add it to your catalog file.
    Import {
        /// The provider: `fal`.
        provider: ImportProvider,
        /// The provider's endpoint id, as the provider names it (for fal: owner/model/variant).
        endpoint: String,
        /// The model id; the endpoint id less its owner when absent.
        #[arg(long)]
        id: Option<String>,
        /// Read the endpoint's schema from the provider's published document first (opt-in
        /// network); when that cannot be read, draft from the schemas held, with a warning.
        #[arg(long)]
        online: bool,
        /// The operator's schema file (`GENJOBS_FAL_SCHEMAS`): read with the shipped schemas, and
        /// given `--online`, the schema read is added to it.
        #[arg(long, env = "GENJOBS_FAL_SCHEMAS")]
        schemas: Option<PathBuf>,
        /// Where fal serves each endpoint's OpenAPI document (`?endpoint_id=` is added).
        #[arg(long, env = "GENJOBS_FAL_SCHEMA_URL", default_value = genjobs_upstream_fal::schema::FAL_SCHEMA_URL)]
        schema_url: String,
    },
}

/// The providers `models import` drafts from.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ImportProvider {
    /// fal's queue API.
    Fal,
}

/// `genjobs users …`
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Create a user and print its API key.
    Create {
        /// Display name.
        #[arg(long)]
        name: String,
        /// Credits granted at creation.
        #[arg(long)]
        credits: u64,
        /// The service's settings (DATABASE_URL).
        #[command(flatten)]
        settings: ConfigArgs,
    },
    /// Grant credits to a user (a negative amount takes them back).
    Grant {
        /// The user's id.
        #[arg(long)]
        id: String,
        /// Credits to add.
        #[arg(long, allow_negative_numbers = true)]
        amount: i64,
        /// The service's settings (DATABASE_URL).
        #[command(flatten)]
        settings: ConfigArgs,
    },
}

impl Command {
    /// The service settings a service subcommand was given; `None` for the client commands.
    #[must_use]
    pub fn settings(&self) -> Option<&ConfigArgs> {
        match self {
            Command::Serve(s) | Command::Migrate(s) | Command::Config(s) | Command::AdminToken(s) => Some(s),
            Command::Users(UsersCommand::Create { settings, .. } | UsersCommand::Grant { settings, .. }) => {
                Some(settings)
            }
            Command::Keys(command) if command.is_operator() => Some(command.settings()),
            Command::Models(ModelsCommand {
                catalog: Some(CatalogCommand::Export { settings } | CatalogCommand::Apply { settings, .. }),
                ..
            }) => Some(settings),
            Command::Keys(_)
            | Command::Image(_)
            | Command::Video(_)
            | Command::Jobs(_)
            | Command::Webhooks(_)
            | Command::Models(_)
            | Command::Account(_)
            | Command::Ledger(_)
            | Command::Usage(_)
            | Command::ConfigTable { .. } => None,
        }
    }
}

impl Command {
    /// The API client's command this is; `None` for the service's commands.
    #[must_use]
    pub fn client(self) -> Option<remote::ClientCommand> {
        use remote::ClientCommand as Client;
        match self {
            Command::Image(args) => Some(Client::Image(args)),
            Command::Video(args) => Some(Client::Video(args)),
            Command::Jobs(command) => Some(Client::Jobs(command)),
            Command::Webhooks(command) => Some(Client::Webhooks(command)),
            Command::Models(ModelsCommand { catalog: None, list }) => Some(Client::Models(list)),
            Command::Account(args) => Some(Client::Account(args)),
            Command::Ledger(args) => Some(Client::Ledger(args)),
            Command::Usage(args) => Some(Client::Usage(args)),
            Command::Keys(command) if !command.is_operator() => Some(Client::Keys(Box::new(command))),
            Command::Serve(_)
            | Command::Migrate(_)
            | Command::Users(_)
            | Command::Keys(_)
            | Command::Config(_)
            | Command::AdminToken(_)
            | Command::ConfigTable { .. }
            | Command::Models(ModelsCommand { catalog: Some(_), .. }) => None,
        }
    }
}

impl Cli {
    /// The command line as the process sees it; a variable set to the empty string counts as
    /// unset, as operators write `GENJOBS_UPSTREAM_URL=` in an env file to mean "none".
    #[must_use]
    pub fn command_from_env() -> clap::Command {
        fn unset_empty(arg: clap::Arg) -> clap::Arg {
            let empty = arg.get_env().and_then(std::env::var_os).is_some_and(|value| value.is_empty());
            if empty { arg.env(None::<&str>) } else { arg }
        }
        let mut command = Cli::command().mut_args(unset_empty);
        let names: Vec<String> = command.get_subcommands().map(|c| c.get_name().to_owned()).collect();
        for name in names {
            command = command.mut_subcommand(name, |sub| sub.mut_args(unset_empty));
        }
        quiet_administration_help(command)
    }
}

/// The administration subcommands take every service setting, as `serve` does, but their
/// `--help` shows only their own flags and `DATABASE_URL`: the rest is `genjobs serve --help`'s.
fn quiet_administration_help(command: clap::Command) -> clap::Command {
    fn quiet(sub: clap::Command) -> clap::Command {
        let service = ConfigArgs::augment_args(clap::Command::new("settings"));
        let hidden: Vec<String> =
            service.get_arguments().map(|a| a.get_id().as_str().to_owned()).filter(|id| id != "database_url").collect();
        sub.mut_args(|arg| if hidden.iter().any(|id| id == arg.get_id().as_str()) { arg.hide(true) } else { arg })
            .after_help("It also takes every setting of `genjobs serve` (`genjobs serve --help` lists them).")
    }
    let nested = |command: clap::Command, name: &str, subs: &[&str]| {
        command.mut_subcommand(name, |mut sub| {
            for inner in subs {
                sub = sub.mut_subcommand(*inner, quiet);
            }
            sub
        })
    };
    let command = command.mut_subcommand("migrate", quiet).mut_subcommand("admin-token", quiet);
    let command = nested(command, "users", &["create", "grant"]);
    let command = nested(command, "keys", &["create", "list", "revoke", "set"]);
    nested(command, "models", &["export", "apply"])
}

/// An administration subcommand that failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
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
                let _ = write!(shown, "dry run: {} not applied", crate::remote::counted(plan.len(), "change"));
            } else {
                admin.apply_catalog(&plan).await.map_err(|e| CliError::Failed(e.to_string()))?;
                let _ = write!(shown, "{} applied", crate::remote::counted(plan.len(), "change"));
            }
            Ok(shown)
        }
        _ => {
            let applied = genjobs_store_postgres::run_migrations(&pg).await.map_err(StartError::from)?;
            Ok(format!("{} applied", crate::remote::counted(applied, "migration")))
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

/// What `genjobs models import` asks for.
#[derive(Debug, Clone, Copy)]
pub struct ImportRequest<'a> {
    /// The provider.
    pub provider: ImportProvider,
    /// Its endpoint id.
    pub endpoint: &'a str,
    /// The model id, if given.
    pub id: Option<&'a str>,
    /// Whether to read the schema online first.
    pub online: bool,
    /// The operator's schema file.
    pub schemas: Option<&'a Path>,
    /// Where the provider serves its schemas.
    pub schema_url: &'a str,
}

/// A draft model document for an endpoint, as `genjobs models import` prints it, and a warning
/// when an online read failed and the draft comes from the schemas held.
///
/// # Errors
/// [`CliError::Invalid`] when no schema of the endpoint is held or read, or the operator's
/// schema file cannot be read or written.
pub async fn import(request: ImportRequest<'_>) -> Result<(String, Option<String>), CliError> {
    use genjobs_upstream_fal::schema::{self, EndpointsFile};
    let ImportProvider::Fal = request.provider;
    let endpoint_id = request.endpoint;
    let mut held = match request.schemas {
        Some(path) if path.exists() => std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| schema::read_endpoints_file(&text))
            .map_err(|e| CliError::Invalid(format!("{}: {e}", path.display())))?,
        _ => EndpointsFile::default(),
    };
    let mut endpoint = held.endpoints.get(endpoint_id).or_else(|| schema::endpoint(endpoint_id)).cloned();
    let mut warning = None;
    if request.online {
        match schema::fetch_online(request.schema_url, endpoint_id).await {
            Ok(read) => {
                if let Some(path) = request.schemas {
                    held.endpoints.insert(endpoint_id.to_owned(), read.clone());
                    let text = serde_json::to_string_pretty(&held).unwrap_or_default();
                    std::fs::write(path, text + "\n")
                        .map_err(|e| CliError::Invalid(format!("cannot write {}: {e}", path.display())))?;
                }
                endpoint = Some(read);
            }
            Err(e) => {
                warning = Some(format!(
                    "fal's schema of {endpoint_id} could not be read online ({e}); drafting from the schemas held"
                ));
            }
        }
    }
    let endpoint = endpoint.ok_or_else(|| {
        let online = warning.as_deref().map_or_else(String::new, |w| format!(" ({w})"));
        CliError::Invalid(format!(
            "genjobs holds no schema of the fal endpoint {endpoint_id:?}; read it with --online, or add it to the file of GENJOBS_FAL_SCHEMAS{online}"
        ))
    })?;
    let draft = genjobs_upstream_fal::draft_from_schema(request.id, endpoint_id, &endpoint);
    Ok((serde_json::to_string_pretty(&draft).unwrap_or_default(), warning))
}

/// The deepest subcommand's matches, where global settings are propagated.
fn innermost(matches: &ArgMatches) -> &ArgMatches {
    match matches.subcommand() {
        Some((_, sub)) => innermost(sub),
        None => matches,
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:****@host/db`.
fn mask_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let Some((credentials, host)) = rest.rsplit_once('@') else { return url.to_owned() };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:****@{host}"),
        None => url.to_owned(),
    }
}

/// Every setting as `VARIABLE=value  # where it came from`, secrets masked, as the innermost
/// command given received them.
#[must_use]
pub fn effective_config(matches: &ArgMatches) -> String {
    let matches = innermost(matches);
    let mut out = String::new();
    for arg in ConfigArgs::augment_args(clap::Command::new("config")).get_arguments() {
        let Some(variable) = arg.get_env().and_then(|v| v.to_str()) else { continue };
        let id = arg.get_id().as_str();
        let raw = matches.get_raw(id).and_then(|mut values| values.next()).map(|v| v.to_string_lossy().into_owned());
        let shown = match raw {
            None => "(unset)".to_owned(),
            Some(url) if variable == "DATABASE_URL" => mask_password(&url),
            Some(_) if arg.is_hide_env_values_set() => "****".to_owned(),
            Some(value) => value,
        };
        let source = match matches.value_source(id) {
            Some(ValueSource::CommandLine) => "flag",
            Some(ValueSource::EnvVariable) => "environment",
            _ => "default",
        };
        let _ = writeln!(out, "{variable}={shown}  # {source}");
    }
    out
}

/// One line for a bad value, naming the variable as well as the flag; clap's own message for
/// every other usage error.
#[must_use]
pub fn usage_message(error: &clap::Error) -> Option<String> {
    let missing = error.kind() == ErrorKind::MissingRequiredArgument;
    if !missing && !matches!(error.kind(), ErrorKind::ValueValidation | ErrorKind::InvalidValue) {
        return None;
    }
    let flag = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(flag)) => flag.clone(),
        Some(ContextValue::Strings(flags)) if flags.len() == 1 => flags[0].clone(),
        _ => return None,
    };
    let long = flag.trim_start_matches('-').split([' ', '=']).next().unwrap_or_default().to_owned();
    let command = Cli::command();
    let argument = every_argument(&command).into_iter().find(|a| a.get_long() == Some(long.as_str()))?;
    let variable = argument.get_env().map(|v| v.to_string_lossy().into_owned())?;
    if missing {
        let what = argument.get_help().map(|help| format!(" {help}")).unwrap_or_default();
        return Some(format!("genjobs: this command needs {variable} (--{long}), which is not set.{what}"));
    }
    let value = match error.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(v)) => v.clone(),
        _ => String::new(),
    };
    let reason = match (error.get(ContextKind::ValidValue), std::error::Error::source(error)) {
        (Some(ContextValue::Strings(valid)), _) => format!("expected one of {}", valid.join(", ")),
        (_, Some(source)) => source.to_string(),
        _ => "not a valid value".to_owned(),
    };
    Some(format!("genjobs: {variable} (--{long}) = {value:?} is not valid: {reason}"))
}

/// The arguments of `command` and of its subcommands, however deep.
pub(crate) fn every_argument(command: &clap::Command) -> Vec<&clap::Arg> {
    command.get_arguments().chain(command.get_subcommands().flat_map(every_argument)).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use std::time::Duration;

    use clap::FromArgMatches;

    use super::*;

    /// Parses `args` alone: the environment of the test process is not read.
    fn parse(args: &[&str]) -> Result<(Cli, ArgMatches), clap::Error> {
        let matches = Cli::command()
            .mut_args(|arg| arg.env(None::<&str>))
            .mut_subcommand("serve", |sub| sub.mut_args(|arg| arg.env(None::<&str>)))
            .mut_subcommand("config", |sub| sub.mut_args(|arg| arg.env(None::<&str>)))
            .try_get_matches_from(std::iter::once("genjobs").chain(args.iter().copied()))?;
        Ok((Cli::from_arg_matches(&matches)?, matches))
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_follow_the_contract() {
        let (cli, _) = parse(&[]).unwrap();
        assert!(cli.command.is_none());
        let c = cli.settings.into_config();
        assert_eq!(c.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(
            (c.gateway.poll_interval, c.driver.steps.poll_interval),
            (Duration::from_secs(2), Duration::from_secs(2))
        );
        assert_eq!(c.http.stream_max, Duration::from_secs(60));
        assert_eq!(c.driver.steps.job_timeout, Duration::from_secs(1800));
        let limits = c.gateway.default_limits;
        assert_eq!((limits.rate_limit_per_minute, limits.max_concurrent_jobs, c.demo_credits), (120, 8, 1000));
        assert!(c.database_url.is_none() && c.upstream_url.is_none() && c.admin_token.is_none());
    }

    #[test]
    fn flags_set_every_adapter_and_may_follow_the_subcommand() {
        let (cli, _) =
            parse(&["serve", "--poll-interval-ms", "50", "--upstream-cancel", "--db-pool-size", "3"]).unwrap();
        let c = cli.command.and_then(|c| c.settings().cloned()).unwrap().into_config();
        assert_eq!(
            (c.gateway.poll_interval, c.driver.steps.poll_interval),
            (Duration::from_millis(50), Duration::from_millis(50))
        );
        assert!(c.gateway.upstream_cancel);
        assert_eq!(c.postgres.pool_size, 3);
    }

    #[test]
    fn the_hardening_settings_have_their_defaults_and_flags() {
        let (defaults, _) = parse(&[]).unwrap();
        let c = defaults.settings.into_config();
        assert_eq!(c.http.body_read_timeout, Duration::from_secs(15));
        assert!(!c.http.trust_forwarded && c.fal_user_id.is_none());
        let (cli, _) = parse(&[
            "--body-read-timeout-secs",
            "3",
            "--trust-forwarded",
            "--unauthenticated-per-minute",
            "7",
            "--fal-user-id",
            "operator",
        ])
        .unwrap();
        let c = cli.settings.into_config();
        assert_eq!((c.http.body_read_timeout, c.http.unauthenticated_per_minute), (Duration::from_secs(3), 7));
        assert!(c.http.trust_forwarded);
        assert_eq!(c.fal_user_id.as_deref(), Some("operator"));
    }

    #[test]
    fn a_bad_value_names_its_variable_on_one_line() {
        for (args, variable) in [
            (&["--stream-max-secs", "soon"][..], "GENJOBS_STREAM_MAX_SECS"),
            (&["--poll-interval-ms", "0"], "GENJOBS_POLL_INTERVAL_MS"),
            (&["--sse-keepalive-secs", "60"], "GENJOBS_SSE_KEEPALIVE_SECS"),
            (&["--bind", "nowhere"], "GENJOBS_BIND"),
            (&["--log-format", "xml"], "GENJOBS_LOG_FORMAT"),
        ] {
            let error = parse(args).unwrap_err();
            let line = usage_message(&error).unwrap();
            assert!(line.contains(variable) && !line.contains('\n'), "{line}");
        }
        assert!(usage_message(&parse(&["--no-such-flag"]).unwrap_err()).is_none());
    }

    #[test]
    fn config_masks_secrets_and_says_where_each_value_came_from() {
        let (_, matches) = parse(&[
            "config",
            "--admin-token",
            "gja_secret",
            "--database-url",
            "postgres://app:hunter2@db:5432/genjobs",
        ])
        .unwrap();
        let printed = effective_config(&matches);
        assert!(!printed.contains("gja_secret") && !printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("GENJOBS_ADMIN_TOKEN=****  # flag"), "{printed}");
        assert!(printed.contains("DATABASE_URL=postgres://app:****@db:5432/genjobs  # flag"), "{printed}");
        assert!(printed.contains("GENJOBS_BIND=127.0.0.1:8080  # default"), "{printed}");
        assert!(printed.contains("GENJOBS_UPSTREAM_URL=(unset)"), "{printed}");
    }
}
