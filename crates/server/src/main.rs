//! `genjobs`: serves the generation API (the default), or runs an operator subcommand. `--help`
//! lists every setting with its variable and default.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::FromArgMatches;
use genjobs::cli::{self, Cli, Command};
use genjobs::{Config, LogFormat, start};
use tracing_subscriber::EnvFilter;

/// Exit status of a usage error, as clap and the contract have it.
const USAGE: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let parsed = Cli::command_from_env().try_get_matches().and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            return match cli::usage_message(&error) {
                Some(line) => {
                    eprintln!("{line}");
                    ExitCode::from(USAGE)
                }
                None => {
                    let _ = error.print();
                    ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(USAGE))
                }
            };
        }
    };
    if let Some(Command::Models(cli::ModelsCommand {
        catalog: Some(cli::CatalogCommand::Import { provider, endpoint, id, online, schemas, schema_url }),
        ..
    })) = &cli.command
    {
        let request = cli::ImportRequest {
            provider: *provider,
            endpoint,
            id: id.as_deref(),
            online: *online,
            schemas: schemas.as_deref(),
            schema_url,
        };
        return match cli::import(request).await {
            Ok((draft, warning)) => {
                if let Some(warning) = warning {
                    eprintln!("genjobs: {warning}");
                }
                println!("{draft}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("genjobs: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(settings) = cli.command.as_ref().map_or(Some(&cli.settings), Command::settings).cloned() else {
        return match cli.command.and_then(Command::client) {
            Some(command) => genjobs::remote::run(command).await,
            None => ExitCode::from(USAGE),
        };
    };
    init_logging(settings.log_format);
    let config = settings.into_config();
    match cli.command {
        None | Some(Command::Serve(_)) => serve(config).await,
        Some(Command::Config(_)) => {
            print!("{}", cli::effective_config(&matches));
            ExitCode::SUCCESS
        }
        Some(command) => match cli::administer(&config, &command).await {
            Ok(output) => {
                println!("{output}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("genjobs: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Text with colours on a terminal; JSON lines, one per event, otherwise (or as asked).
fn init_logging(format: Option<LogFormat>) {
    let terminal = std::io::stderr().is_terminal();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter);
    let json = format.map_or(!terminal, |f| f == LogFormat::Json);
    if json {
        builder.json().flatten_event(true).with_current_span(false).with_span_list(false).init();
    } else {
        builder.with_ansi(terminal).init();
    }
}

async fn serve(config: Config) -> ExitCode {
    let service = match start(config).await {
        Ok(service) => service,
        Err(e) => {
            eprintln!("genjobs: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("genjobs listening on http://{}", service.address);
    println!("admin token: {}", service.admin_token);
    if let Some(key) = &service.demo_key {
        println!("demo user API key: {key}");
    }
    if let Some(url) = &service.simulator_url {
        println!("upstream: built-in fal simulator at {url}");
    }
    match service.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("genjobs: {e}");
            ExitCode::FAILURE
        }
    }
}
