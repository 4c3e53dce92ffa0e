//! The command line: `genjobs [serve]` serves; `migrate`, `users create`, `users grant`,
//! `keys create|list|revoke|set` (`keys_cli`) when `DATABASE_URL` is set, `models export` and
//! `models apply` administer the store at `DATABASE_URL`; `models import`
//! drafts a model document from a provider's schema genjobs holds; `config` prints the effective
//! configuration, secrets masked; `image`, `video`, `jobs`, `models`, `account`, and `keys`
//! without `DATABASE_URL`, are the API's client (`remote`).

mod administer;
mod effective;
mod import;
mod usage;

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};

pub use administer::administer;
pub use effective::effective_config;
pub use import::{ImportRequest, import};
pub(crate) use usage::every_argument;
pub use usage::usage_message;

pub use crate::cli_error::CliError;
use crate::config::ConfigArgs;
use crate::keys_cli::KeysCommand;
use crate::remote;

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
    /// Submit a file of generations as one batch at the batch price, follow it, read its results.
    #[command(subcommand)]
    Batch(remote::BatchCommand),
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
            | Command::Batch(_)
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
            Command::Batch(command) => Some(Client::Batch(command)),
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

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use std::time::Duration;

    use clap::{ArgMatches, FromArgMatches};

    use super::*;

    /// Parses `args` alone: the environment of the test process is not read.
    pub(super) fn parse(args: &[&str]) -> Result<(Cli, ArgMatches), clap::Error> {
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
        assert_eq!(c.simulator.port, 8788, "the built-in simulator's port survives restarts");
    }

    #[test]
    fn a_credit_is_worth_a_cent_unless_set_and_a_bad_worth_is_refused_by_name() {
        let (cli, _) = parse(&[]).unwrap();
        assert_eq!(cli.settings.into_config().credit_usd.to_string(), "0.01");
        let (cli, _) = parse(&["--credit-usd", "0.0125"]).unwrap();
        assert_eq!(cli.settings.into_config().credit_usd.to_string(), "0.0125");
        for bad in ["--credit-usd=abc", "--credit-usd=-1", "--credit-usd=0.1e2"] {
            let refused = parse(&[bad]).map(|_| ()).unwrap_err().to_string();
            assert!(refused.contains("GENJOBS_CREDIT_USD"), "{refused}");
        }
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
}
