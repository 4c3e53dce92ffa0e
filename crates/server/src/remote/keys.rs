//! `genjobs keys` without `DATABASE_URL`: the caller's own keys through `/api/v1/account/keys`.
//! A flag's bad value, a refused `--user` or `keys set`, and the service's 400 are usage errors
//! (exit 2); the other exit statuses are the client's.

use genjobs_client::{Client, Error};
use serde_json::json;

use super::{Connection, Stop, query};
use crate::cli_error::CliError;
use crate::keys_cli::{KeysCommand, issued, line, new_key};

/// Why `keys set` is an operator's only.
const NO_USER_CHANGE: &str = "`keys set` changes a key through the operators' PATCH /api/admin/keys/{prefix}, so it \
     needs DATABASE_URL; the API lets a user create, list and revoke their keys but not change one: revoke it \
     (`genjobs keys revoke --prefix …`) and create another (`genjobs keys create …`)";

fn usage(e: CliError) -> Stop {
    Stop::Usage(e.to_string())
}

/// Runs `command` on the caller's own keys.
pub(super) async fn run(command: KeysCommand) -> (Connection, Result<(), Stop>) {
    let connection = command.connection().clone();
    let outcome = match checked(&command) {
        Ok(()) => call(&connection, command).await,
        Err(stop) => Err(stop),
    };
    // The service's 400 names the field at fault, as a bad flag does before the call.
    let outcome = outcome.map_err(|stop| match stop {
        Stop::Call(Error::Api(refusal)) if refusal.status == 400 => {
            let param = refusal.param.as_deref().map_or_else(String::new, |p| format!("{p}: "));
            Stop::Usage(format!("{param}{}", refusal.message))
        }
        other => other,
    });
    (connection, outcome)
}

/// What the command line must give for a user's own keys.
fn checked(command: &KeysCommand) -> Result<(), Stop> {
    if let KeysCommand::Set { .. } = command {
        return Err(Stop::Usage(NO_USER_CHANGE.to_owned()));
    }
    if let KeysCommand::Create { user: Some(_), .. } | KeysCommand::List { user: Some(_), .. } = command {
        return Err(Stop::Usage(format!(
            "`{}` --user works on another user's keys, which only operators do: set DATABASE_URL",
            command.name()
        )));
    }
    if command.connection().api_key.is_none() {
        return Err(Stop::Usage(format!(
            "`{}` without DATABASE_URL works on your own keys and needs GENJOBS_API_KEY (--api-key)",
            command.name()
        )));
    }
    Ok(())
}

async fn call(connection: &Connection, command: KeysCommand) -> Result<(), Stop> {
    match command {
        KeysCommand::Create { flags, .. } => {
            let body = new_key(&flags).map_err(usage)?;
            query(connection, async |client: Client| {
                let key = client.create_key(&body).await?;
                Ok((json!(key), issued(&key)))
            })
            .await
        }
        KeysCommand::List { .. } => {
            query(connection, async |client: Client| {
                let keys = client.keys().await?;
                Ok((json!({ "data": keys }), keys.iter().map(line).collect::<Vec<_>>().join("\n")))
            })
            .await
        }
        KeysCommand::Revoke { prefix, .. } => {
            query(connection, async |client: Client| {
                client.revoke_key(&prefix).await?;
                Ok((json!({ "revoked": prefix }), format!("key {prefix} revoked")))
            })
            .await
        }
        KeysCommand::Set { .. } => Err(Stop::Usage(NO_USER_CHANGE.to_owned())),
    }
}
