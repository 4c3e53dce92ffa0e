//! The configuration reference's tables (`docs/configuration.md`), made from the clap definitions
//! `genjobs --help` shows: one table per `--help` heading, in its order, each setting with its
//! variable, flag, default and meaning. `genjobs config-table` prints them; `cargo xtask
//! config-table` (`genjobs config-table --file docs/configuration.md`) writes them into that file
//! between [`BEGIN`] and [`END`]; a test fails when the file's copy is not this.

use std::fmt::Write as _;

use clap::{Args, CommandFactory};

use crate::cli::{Cli, every_argument};
use crate::config::ConfigArgs;

/// The line before the tables in the file.
pub const BEGIN: &str = "<!-- config-table: written by `cargo xtask config-table` from the flags; do not edit -->";
/// The line after it.
pub const END: &str = "<!-- end of config-table -->";

/// The tables, in Markdown: the service's settings under their `--help` headings, then the
/// variables only subcommands read.
#[must_use]
pub fn markdown() -> String {
    let settings = ConfigArgs::augment_args(clap::Command::new("genjobs"));
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    for arg in settings.get_arguments().filter(|arg| !arg.is_hide_set()) {
        let Some((variable, row)) = row(arg) else { continue };
        let heading = arg.get_help_heading().unwrap_or("Options").to_owned();
        listed.push(variable);
        match sections.iter_mut().find(|(name, _)| *name == heading) {
            Some((_, rows)) => rows.push(row),
            None => sections.push((heading, vec![row])),
        }
    }
    let mut subcommands: Vec<(String, String, Vec<String>)> = Vec::new();
    for (name, arg) in subcommand_arguments(&Cli::command()) {
        let Some((variable, row)) = row(arg) else { continue };
        if listed.contains(&variable) {
            continue;
        }
        let name = format!("`{name}`");
        match subcommands.iter_mut().find(|(listed, ..)| *listed == variable) {
            Some((.., names)) if names.contains(&name) => {}
            Some((.., names)) => names.push(name),
            None => subcommands.push((variable, row, vec![name])),
        }
    }
    let mut out = String::new();
    for (heading, rows) in sections {
        let _ = writeln!(out, "### {heading}\n\n| variable | flag | default | meaning |\n|---|---|---|---|");
        for row in rows {
            let _ = writeln!(out, "{row}");
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "### Read by subcommands only\n\n| variable | flag | default | meaning | read by |\n|---|---|---|---|---|"
    );
    for (_, row, names) in subcommands {
        let _ = writeln!(out, "{row} {} |", names.join(", "));
    }
    out.push('\n');
    out
}

/// The arguments of every subcommand of `command`, however deep, each with the name of the
/// subcommand of `command` it belongs to.
fn subcommand_arguments(command: &clap::Command) -> Vec<(&str, &clap::Arg)> {
    command
        .get_subcommands()
        .flat_map(|sub| every_argument(sub).into_iter().map(move |arg| (sub.get_name(), arg)))
        .collect()
}

/// A setting's variable and its row (without the closing of a last column), `None` for an
/// argument that has no variable.
fn row(arg: &clap::Arg) -> Option<(String, String)> {
    let (variable, long) = (arg.get_env()?.to_str()?.to_owned(), arg.get_long()?);
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    let (meaning, stated_default) = split_default(&help);
    let defaults: Vec<String> = arg.get_default_values().iter().map(|v| format!("`{}`", v.to_string_lossy())).collect();
    let default = match (arg.get_action(), defaults.is_empty(), stated_default) {
        (clap::ArgAction::SetTrue, ..) => "off".to_owned(),
        (_, false, _) => defaults.join(", "),
        (_, true, Some(stated)) => stated,
        (_, true, None) => "unset".to_owned(),
    };
    let choices: Vec<String> =
        arg.get_possible_values().iter().filter(|v| !v.is_hide_set()).map(|v| format!("`{}`", v.get_name())).collect();
    let meaning = match (arg.get_action(), choices.is_empty()) {
        (clap::ArgAction::SetTrue, _) => format!("{meaning} (`true` or `1` turns it on)"),
        (_, false) => format!("{meaning} (one of {})", choices.join(", ")),
        (_, true) => meaning,
    };
    Some((variable.clone(), format!("| `{variable}` | `--{long}` | {default} | {} |", meaning.replace('|', "\\|"))))
}

/// A help text without its `[default: …]`, and what that says.
fn split_default(help: &str) -> (String, Option<String>) {
    let Some((before, rest)) = help.split_once("[default: ") else { return (help.trim_end().to_owned(), None) };
    let (stated, after) = rest.split_once(']').unwrap_or((rest, ""));
    (format!("{}{after}", before.trim_end()).trim_end().to_owned(), Some(stated.to_owned()))
}

/// `document` with its tables replaced by [`markdown`]'s; `None` when it has no markers.
#[must_use]
pub fn written_into(document: &str) -> Option<String> {
    let (before, rest) = document.split_once(BEGIN)?;
    let (_, after) = rest.split_once(END)?;
    Some(format!("{before}{BEGIN}\n\n{}{END}{after}", markdown()))
}

/// Writes the tables into the Markdown file at `path`.
///
/// # Errors
/// When the file cannot be read or written, or has no markers.
pub fn write_into(path: &std::path::Path) -> Result<(), String> {
    let shown = path.display();
    let document = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let written = written_into(&document).ok_or_else(|| format!("{shown} has no `{BEGIN}` and `{END}` lines"))?;
    std::fs::write(path, written).map_err(|e| format!("cannot write {shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_is_one_row_under_its_heading() {
        let table = markdown();
        assert!(table.starts_with("### Service\n\n| variable | flag | default | meaning |\n"), "{table}");
        assert!(table.contains("| `GENJOBS_BIND` | `--bind` | `127.0.0.1:8080` | Listen address |"), "{table}");
        let log = "| `GENJOBS_LOG_FORMAT` | `--log-format` | text on a terminal, json otherwise | Log line format; RUST_LOG filters them (one of `json`, `text`) |";
        assert!(table.contains(log), "{table}");
        assert!(table.contains("| `GENJOBS_API_KEY` | `--api-key` | unset |"), "{table}");
        assert!(table.contains("| `GENJOBS_HTTP_WORKERS` | `--http-workers` | one per core |"), "{table}");
        for variable in ["GENJOBS_WEBHOOK_ALLOW_PRIVATE", "GENJOBS_SECRET_KEY", "GENJOBS_CLIENT_WEBHOOK_BACKOFF_MS"] {
            assert_eq!(table.matches(&format!("| `{variable}` |")).count(), 1, "{variable}: {table}");
        }
    }

    #[test]
    fn the_configuration_reference_holds_the_tables_the_flags_make() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
        let document = std::fs::read_to_string(path).unwrap();
        let written = written_into(&document).expect("docs/configuration.md has the config-table markers");
        assert!(written == document, "docs/configuration.md is stale: run `cargo xtask config-table`");
    }
}
