//! `genjobs config`: the effective configuration, secrets masked, each value with its source.

use std::fmt::Write as _;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args};

use crate::config::ConfigArgs;

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
        // A list setting (`GENJOBS_OUTPUT_HOSTS`) is shown whole, as its variable takes it.
        let raw = matches
            .get_raw(id)
            .map(|values| values.map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>().join(","));
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use super::*;
    use crate::cli::tests::parse;

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

    #[test]
    fn config_shows_every_value_of_a_list_setting() {
        let (_, defaults) = parse(&["config"]).unwrap();
        let shown = effective_config(&defaults);
        let hosts = genjobs_output_store::DEFAULT_OUTPUT_HOSTS.join(",");
        assert!(shown.contains(&format!("GENJOBS_OUTPUT_HOSTS={hosts}  # default")), "{shown}");
        let (_, given) = parse(&["config", "--output-hosts", "cdn.example,media.example"]).unwrap();
        let shown = effective_config(&given);
        assert!(shown.contains("GENJOBS_OUTPUT_HOSTS=cdn.example,media.example  # flag"), "{shown}");
    }
}
