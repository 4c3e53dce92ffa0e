//! Usage errors in one line, naming the variable as well as the flag.

use clap::CommandFactory;
use clap::error::{ContextKind, ContextValue, ErrorKind};

use super::Cli;

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

    use super::*;
    use crate::cli::tests::parse;

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
}
