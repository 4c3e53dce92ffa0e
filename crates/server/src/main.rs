//! `genjobs`: serves the generation API (the default), or runs an operator subcommand against
//! `DATABASE_URL`. See the README for the configuration.

use std::process::ExitCode;

use genjobs::{Config, cli, start};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("genjobs: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.first().is_none_or(|a| a == "serve") {
        return serve(config).await;
    }
    match cli::run(&config, &args).await {
        Ok(output) => {
            println!("{output}");
            ExitCode::SUCCESS
        }
        Err(e @ cli::CliError::Usage) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("genjobs: {e}");
            ExitCode::FAILURE
        }
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
