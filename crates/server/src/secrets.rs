//! The service's own secrets at start: the admin token, the key users' webhook secrets are sealed
//! under, and the key output links are signed under. Each is the operator's setting when set;
//! otherwise it is made at the first start over a store and kept there ([`KeptSecrets`]), so that
//! a restart or another replica of a durable store finds the same one. A generated admin token is
//! kept only as its SHA-256, so it is shown once, by the start that made it.

use genjobs_domain::ids::{AdminToken, ApiKey, KeyHash};
use genjobs_domain::ports::{KeptName, KeptSecrets};
use ring::rand::{SecureRandom, SystemRandom};

use crate::{Config, StartError};

/// The shortest admin token or link secret accepted: a short one can be guessed offline.
pub const MIN_SECRET_CHARS: usize = 32;

/// Bytes of each key the service makes.
const KEY_BYTES: usize = 32;

/// The secrets a start resolved.
pub(crate) struct ServiceSecrets {
    /// What `/api/admin` checks a bearer token against.
    pub admin_token: AdminToken,
    /// The admin token, when this start generated it: to show once.
    pub generated_admin_token: Option<String>,
    /// What users' webhook secrets are sealed under.
    pub webhook_key: String,
    /// What builds before the kept key sealed them under, when that may differ: a key derived
    /// from the configured admin token, with GENJOBS_SECRET_KEY unset. Secrets sealed then stay
    /// readable after an upgrade.
    pub earlier_webhook_key: Option<String>,
    /// What output links' signing key is derived from.
    pub link_key: Vec<u8>,
}

/// The configured secrets, or those kept in `kept`, made there first when missing.
///
/// # Errors
/// [`StartError::ShortSecret`] for a configured admin token or link secret under
/// [`MIN_SECRET_CHARS`]; [`StartError::KeptSecrets`] when the store cannot keep or give them.
pub(crate) async fn resolve(config: &Config, kept: &dyn KeptSecrets) -> Result<ServiceSecrets, StartError> {
    refuse_short(config)?;
    let (admin_token, generated_admin_token) = match config.admin_token.as_deref() {
        Some(token) => (AdminToken::new(token), None),
        None => generated_admin_token(kept).await?,
    };
    let webhook_key = match &config.secret_key {
        Some(key) => key.clone(),
        None => {
            tracing::warn!("{}", unset_key_warning(config, "GENJOBS_SECRET_KEY", "webhook secrets are sealed"));
            hex::encode(kept_key(kept, KeptName::WebhookSecretKey).await?)
        }
    };
    let link_key = match &config.link_secret {
        Some(secret) => secret.as_bytes().to_vec(),
        None => {
            tracing::warn!("{}", unset_key_warning(config, "GENJOBS_LINK_SECRET", "output links are signed"));
            kept_key(kept, KeptName::LinkKey).await?
        }
    };
    let earlier_webhook_key = match (&config.secret_key, &config.admin_token) {
        (None, Some(token)) => Some(format!("derived from the admin token\n{token}")),
        _ => None,
    };
    Ok(ServiceSecrets { admin_token, generated_admin_token, webhook_key, earlier_webhook_key, link_key })
}

/// The start's warning for a key setting left unset: where the key made in its place lives,
/// which differs by store. In the database, whoever reads it can use the key; in memory, the key
/// (like everything else) ends with the process.
fn unset_key_warning(config: &Config, variable: &str, what: &str) -> String {
    let kept = match config.database_url {
        Some(_) => "a key made at the first start and kept in the database (its kept_secrets table)",
        None => "a key made by this start and kept in memory, as everything else on the in-memory store",
    };
    format!("{variable} is not set: {what} under {kept}")
}

/// A new admin token in place of the kept one, for `genjobs admin-token`: shown once, kept as
/// its hash.
///
/// # Errors
/// [`StartError::KeptSecrets`] when the store cannot keep it.
pub(crate) async fn replace_admin_token(kept: &dyn KeptSecrets) -> Result<String, StartError> {
    let token = new_admin_token();
    kept.replace(KeptName::AdminTokenHash, AdminToken::new(&token).hash().as_bytes().to_vec()).await?;
    Ok(token)
}

/// A setting's variable and flag, for the message that refuses it.
type Setting = (&'static str, &'static str);
const ADMIN_TOKEN: Setting = ("GENJOBS_ADMIN_TOKEN", "--admin-token");
const LINK_SECRET: Setting = ("GENJOBS_LINK_SECRET", "--link-secret");

/// Refuses a configured admin token or link secret under [`MIN_SECRET_CHARS`]; checked before
/// anything starts, so that the refusal is the only thing a bad start prints.
///
/// # Errors
/// [`StartError::ShortSecret`], naming the setting.
pub(crate) fn refuse_short(config: &Config) -> Result<(), StartError> {
    for (secret, (variable, flag)) in [(&config.admin_token, ADMIN_TOKEN), (&config.link_secret, LINK_SECRET)] {
        let length = secret.as_deref().map_or(MIN_SECRET_CHARS, |s| s.chars().count());
        if length < MIN_SECRET_CHARS {
            return Err(StartError::ShortSecret { variable, flag, length });
        }
    }
    Ok(())
}

fn new_admin_token() -> String {
    ApiKey::generate().expose().replacen("gj_", "gja_", 1)
}

/// The kept admin token's hash; made, with the token it hashes, by the first start.
async fn generated_admin_token(kept: &dyn KeptSecrets) -> Result<(AdminToken, Option<String>), StartError> {
    let token = new_admin_token();
    let candidate = AdminToken::new(&token);
    let found = kept.keep_first(KeptName::AdminTokenHash, candidate.hash().as_bytes().to_vec()).await?;
    if found.made_now {
        return Ok((candidate, Some(token)));
    }
    let hash: [u8; 32] = found.value.try_into().map_err(|_| {
        StartError::KeptSecrets(genjobs_domain::ports::StoreError::Internal(
            "the kept admin token hash is not 32 bytes".into(),
        ))
    })?;
    Ok((AdminToken::from_hash(KeyHash::from_bytes(hash)), None))
}

async fn kept_key(kept: &dyn KeptSecrets, name: KeptName) -> Result<Vec<u8>, StartError> {
    let mut candidate = vec![0u8; KEY_BYTES];
    // The system's generator fails only where the process cannot run at all.
    if SystemRandom::new().fill(&mut candidate).is_err() {
        panic!("the system's random number generator failed");
    }
    Ok(kept.keep_first(name, candidate).await?.value)
}

#[cfg(test)]
mod tests {
    use genjobs_store_memory::MemoryStore;

    use super::*;

    #[tokio::test]
    async fn unset_secrets_are_made_once_and_the_token_shown_only_then() {
        let store = MemoryStore::new();
        let first = resolve(&Config::default(), &store).await.unwrap();
        let token = first.generated_admin_token.clone().unwrap();
        assert!(token.starts_with("gja_") && token.len() >= MIN_SECRET_CHARS, "{token}");
        let again = resolve(&Config::default(), &store).await.unwrap();
        assert_eq!(again.generated_admin_token, None, "shown by the start that made it only");
        assert!(again.admin_token.verify(&token));
        assert_eq!((again.webhook_key, again.link_key), (first.webhook_key, first.link_key));
    }

    #[tokio::test]
    async fn short_configured_secrets_are_refused_by_name() {
        let store = MemoryStore::new();
        let short = Config { admin_token: Some("x".repeat(31)), ..Config::default() };
        let refused = resolve(&short, &store).await.err().unwrap().to_string();
        assert!(refused.starts_with("GENJOBS_ADMIN_TOKEN (--admin-token) is 31 characters long"), "{refused}");
        let link = Config { link_secret: Some("short".into()), ..Config::default() };
        let refused = resolve(&link, &store).await.err().unwrap().to_string();
        assert!(refused.starts_with("GENJOBS_LINK_SECRET (--link-secret) is 5 characters"), "{refused}");
        let fine = Config { admin_token: Some("y".repeat(32)), ..Config::default() };
        let resolved = resolve(&fine, &store).await.unwrap();
        assert_eq!(resolved.generated_admin_token, None, "a configured token is never printed");
    }

    #[test]
    fn the_unset_key_warning_says_where_the_store_in_use_keeps_it() {
        let memory = unset_key_warning(&Config::default(), "GENJOBS_LINK_SECRET", "output links are signed");
        assert!(memory.starts_with("GENJOBS_LINK_SECRET is not set: output links are signed under"), "{memory}");
        assert!(memory.contains("in memory") && !memory.contains("database"), "{memory}");
        let postgres = Config { database_url: Some("postgres://db/genjobs".into()), ..Config::default() };
        let kept = unset_key_warning(&postgres, "GENJOBS_SECRET_KEY", "webhook secrets are sealed");
        assert!(kept.contains("kept in the database") && !kept.contains("memory"), "{kept}");
    }
}
