//! `genjobs`: serves the generation API (the default), or runs an operator subcommand. `--help`
//! lists every setting with its variable and default.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::FromArgMatches;
use genjobs::cli::{self, Cli, Command};
use genjobs::logs::{JsonLines, LogFlush, LogWriter};
use genjobs::traces::{TraceExport, WithTraceId, tracer};
use genjobs::{Config, LogFormat, start};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Exit status of a usage error, as clap and the contract have it.
const USAGE: u8 = 2;

/// Every allocation of the process: see the dependency's note in `Cargo.toml`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    // With transparent huge pages, the allocator's short-lived megabytes (a batch of 5,000 items
    // read, checked and bound) are zeroed 2 MiB a fault and stay resident while any byte of the
    // huge page is used: a replica kept about 30 MB more after 20 such batches, and zeroing was a
    // third of its CPU while accepting them. Where the kernel refuses, nothing else changes.
    let _ = nix::sys::prctl::set_thp_disable(true);
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
    if let Some(Command::ConfigTable { file }) = &cli.command {
        return match file {
            None => {
                print!("{}", genjobs::config_table::markdown());
                ExitCode::SUCCESS
            }
            Some(path) => match genjobs::config_table::write_into(path) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("genjobs: {e}");
                    ExitCode::FAILURE
                }
            },
        };
    }
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
    // A one-shot command's output is its answer: the service's own events (migrations, the
    // listener) would only bury it, so they show from `warn` up unless RUST_LOG asks.
    let serving = matches!(cli.command, None | Some(Command::Serve(_)));
    let log_format = settings.log_format;
    let config = settings.into_config();
    // Dropped last, when `main` returns: every line logged until then is written first.
    let (exported, _flush) =
        match init_logging(log_format, if serving { "info" } else { "warn" }, config.traces.as_ref()) {
            Ok(logging) => logging,
            Err(e) => {
                eprintln!("genjobs: {e}");
                return ExitCode::from(USAGE);
            }
        };
    match cli.command {
        None | Some(Command::Serve(_)) => {
            let code = serve(config).await;
            // What the batch processor still holds leaves before the process does.
            if let Some(provider) = exported
                && let Err(e) = provider.shutdown()
            {
                eprintln!("genjobs: the last spans were not exported: {e}");
            }
            code
        }
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
                let usage = matches!(e, cli::CliError::NoDatabase(_) | cli::CliError::Invalid(_));
                if usage { ExitCode::from(USAGE) } else { ExitCode::FAILURE }
            }
        },
    }
}

/// Text with colours on a terminal; JSON lines, one per event, otherwise (or as asked); from
/// `default_level` up unless RUST_LOG says otherwise; written to stderr by a thread of their own,
/// which the [`LogFlush`] returned ends once they are all out. With `traces`, spans are exported
/// there too, and JSON lines carry their `trace_id`; the provider returned flushes them at the
/// end.
///
/// # Errors
/// When the exporter cannot be built, or the writing thread started.
fn init_logging(
    format: Option<LogFormat>,
    default_level: &str,
    traces: Option<&TraceExport>,
) -> Result<(Option<SdkTracerProvider>, LogFlush), String> {
    let terminal = std::io::stderr().is_terminal();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let json = format.map_or(!terminal, |f| f == LogFormat::Json);
    let (lines, flush) =
        LogWriter::spawn(Box::new(std::io::stderr())).map_err(|e| format!("cannot start the log writer: {e}"))?;
    let registry = tracing_subscriber::registry().with(filter);
    let Some(export) = traces else {
        if json {
            registry.with(tracing_subscriber::fmt::layer().with_writer(lines).event_format(JsonLines::new())).init();
        } else {
            registry.with(tracing_subscriber::fmt::layer().with_writer(lines).with_ansi(terminal)).init();
        }
        return Ok((None, flush));
    };
    let (provider, tracer) = tracer(export)?;
    let spans = tracing_opentelemetry::layer().with_tracer(tracer);
    if json {
        registry
            .with(spans)
            .with(tracing_subscriber::fmt::layer().with_writer(lines).event_format(WithTraceId(JsonLines::new())))
            .init();
    } else {
        registry.with(spans).with(tracing_subscriber::fmt::layer().with_writer(lines).with_ansi(terminal)).init();
    }
    Ok((Some(provider), flush))
}

async fn serve(config: Config) -> ExitCode {
    let token_configured = config.admin_token.is_some();
    let service = match start(config).await {
        Ok(service) => service,
        Err(e) => {
            eprintln!("genjobs: {e}");
            let usage = matches!(e, genjobs::StartError::ShortSecret { .. });
            return if usage { ExitCode::from(USAGE) } else { ExitCode::FAILURE };
        }
    };
    println!("genjobs listening on http://{}", service.address);
    match &service.admin_token {
        Some(generated) => println!("admin token: {generated}"),
        None if !token_configured => {
            println!(
                "admin token: the last one printed, by the first start or by `genjobs admin-token` since (which makes a new one)"
            );
        }
        None => {}
    }
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
