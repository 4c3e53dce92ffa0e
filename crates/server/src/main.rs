//! `genjobs`: serves the generation API (the default), or administers users against
//! `DATABASE_URL`. See the README for the configuration.

use std::process::ExitCode;

use genjobs::{Config, start};

fn usage() -> ExitCode {
    eprintln!(
        "usage: genjobs [serve]\n       genjobs users create --name N --credits C\n       genjobs users grant --id ID --amount A\n       genjobs migrate"
    );
    ExitCode::from(2)
}

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
    match args.first().map(String::as_str) {
        None | Some("serve") => serve().await,
        Some("users" | "migrate") => {
            eprintln!(
                "genjobs: `{}` works against DATABASE_URL, and this build serves only the embedded in-memory store; use the admin API (/api/admin) instead",
                args.join(" ")
            );
            ExitCode::FAILURE
        }
        Some(_) => usage(),
    }
}

async fn serve() -> ExitCode {
    let service = match Config::from_env() {
        Ok(config) => start(config).await,
        Err(e) => Err(e.into()),
    };
    let service = match service {
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
