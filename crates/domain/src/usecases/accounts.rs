//! Authentication, the caller's account, and the operators' user, key and credit administration.

use std::time::Duration;

use serde_json::Value;

use super::Gateway;
use crate::credits::Credits;
use crate::ids::{ApiKey, KeyPrefix, UserId};
use crate::ports::{Account, AccountError, Limits, RateDecision, StoreError, StoredKey};
use crate::request::InvalidRequest;

/// An authenticated caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// Who is calling.
    pub user_id: UserId,
}

/// Why a request is not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// 401 `INVALID_API_KEY`: no such key, or a revoked one.
    #[error("the API key is not valid")]
    InvalidKey,
    /// 429 `RATE_LIMIT_EXCEEDED`.
    #[error("too many requests; retry in {} s", .retry_after.as_secs().max(1))]
    RateLimited {
        /// Time until a request would be allowed.
        retry_after: Duration,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why an operator's request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// 404: no such user.
    #[error("no user with this id")]
    UnknownUser,
    /// 404: no key with this prefix.
    #[error("no API key with this prefix")]
    UnknownKey,
    /// 400: the body or a parameter is not valid.
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AccountError> for AdminError {
    fn from(e: AccountError) -> Self {
        match e {
            AccountError::UnknownUser => AdminError::UnknownUser,
            AccountError::GrantBelowZero { .. } => AdminError::Invalid(InvalidRequest::param("amount", e.to_string())),
            AccountError::KeyPrefixTaken => AdminError::Store(StoreError::Internal(e.to_string())),
            AccountError::Store(e) => AdminError::Store(e),
        }
    }
}

/// Body of `POST /api/admin/users`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUserRequest {
    /// Display name, 1 to 200 characters.
    pub name: String,
    /// Opening grant.
    pub credits: Credits,
    /// Request rate limit; the service default when absent.
    pub rate_limit_per_minute: Option<u32>,
    /// Concurrent-job limit; the service default when absent.
    pub max_concurrent_jobs: Option<u32>,
}

fn object(body: &Value) -> Result<&serde_json::Map<String, Value>, InvalidRequest> {
    body.as_object().ok_or_else(|| InvalidRequest::body("the body must be a JSON object"))
}

fn reject_unknown(map: &serde_json::Map<String, Value>, known: &[&str]) -> Result<(), InvalidRequest> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(InvalidRequest::param(k, format!("unknown field `{k}`"))),
        None => Ok(()),
    }
}

fn positive_u32(map: &serde_json::Map<String, Value>, name: &str) -> Result<Option<u32>, InvalidRequest> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(|| InvalidRequest::param(name, format!("`{name}` must be a positive integer"))),
    }
}

impl NewUserRequest {
    /// Validates the body.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming the field at fault.
    pub fn parse(body: &Value) -> Result<Self, InvalidRequest> {
        let map = object(body)?;
        reject_unknown(map, &["name", "credits", "rate_limit_per_minute", "max_concurrent_jobs"])?;
        let name = match map.get("name") {
            Some(Value::String(n)) if !n.trim().is_empty() && n.chars().count() <= 200 => n.trim().to_owned(),
            _ => {
                return Err(InvalidRequest::param("name", "`name` must be a string of 1 to 200 characters"));
            }
        };
        let credits = map
            .get("credits")
            .and_then(Value::as_u64)
            .filter(|c| i64::try_from(*c).is_ok())
            .ok_or_else(|| InvalidRequest::param("credits", "`credits` must be a non-negative integer"))?;
        Ok(Self {
            name,
            credits: Credits::new(credits),
            rate_limit_per_minute: positive_u32(map, "rate_limit_per_minute")?,
            max_concurrent_jobs: positive_u32(map, "max_concurrent_jobs")?,
        })
    }
}

/// Validates the body of `POST /api/admin/users/{id}/credits`: `{amount}`, a non-zero integer.
///
/// # Errors
/// [`InvalidRequest`] naming `amount` or the unknown field.
pub fn parse_grant(body: &Value) -> Result<i64, InvalidRequest> {
    let map = object(body)?;
    reject_unknown(map, &["amount"])?;
    map.get("amount")
        .and_then(Value::as_i64)
        .filter(|a| *a != 0)
        .ok_or_else(|| InvalidRequest::param("amount", "`amount` must be a non-zero integer"))
}

/// How often a new key is drawn when its prefix is taken (48 random bits make a second try rare).
const KEY_ATTEMPTS: usize = 4;

impl Gateway {
    /// Lets a request in: the key must be known, and the user under its rate limit.
    ///
    /// # Errors
    /// See [`AuthError`].
    pub async fn authenticate(&self, presented: &str) -> Result<Caller, AuthError> {
        let key = ApiKey::from_presented(presented);
        let hash = key.hash();
        let credential = self
            .ports
            .accounts
            .credentials(&key.prefix())
            .await?
            .into_iter()
            .find(|c| c.hash.matches(&hash))
            .ok_or(AuthError::InvalidKey)?;
        match self.ports.rate_limiter.acquire(credential.user_id, credential.rate_limit_per_minute).await? {
            RateDecision::Allowed => Ok(Caller { user_id: credential.user_id }),
            RateDecision::Limited { retry_after } => {
                tracing::info!(user_id = %credential.user_id, "rate limited");
                Err(AuthError::RateLimited { retry_after })
            }
        }
    }

    /// The caller's account.
    ///
    /// # Errors
    /// [`StoreError`] when the store fails.
    pub async fn account(&self, caller: &Caller) -> Result<Account, StoreError> {
        self.ports
            .accounts
            .account(caller.user_id)
            .await?
            .ok_or_else(|| StoreError::Internal("an authenticated user has no account".into()))
    }

    /// Creates a user with an opening grant and a first key, which is returned only here.
    ///
    /// # Errors
    /// [`AdminError::Store`] when the store fails.
    pub async fn create_user(&self, request: NewUserRequest) -> Result<(Account, ApiKey), AdminError> {
        let now = self.ports.clock.now();
        let user_id = self.ports.ids.user_id(now);
        let limits = Limits {
            rate_limit_per_minute: request
                .rate_limit_per_minute
                .unwrap_or(self.settings.default_limits.rate_limit_per_minute),
            max_concurrent_jobs: request
                .max_concurrent_jobs
                .unwrap_or(self.settings.default_limits.max_concurrent_jobs),
        };
        for _ in 0..KEY_ATTEMPTS {
            let key = self.ports.ids.api_key();
            let stored = StoredKey::of(&key, user_id, now);
            match self.ports.accounts.create_user(user_id, request.name.clone(), request.credits, limits, stored).await
            {
                Ok(account) => {
                    tracing::info!(user_id = %user_id, credits = %request.credits, "user created");
                    return Ok((account, key));
                }
                Err(AccountError::KeyPrefixTaken) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Internal("could not draw an unused key prefix".into()).into())
    }

    /// Issues another key to a user.
    ///
    /// # Errors
    /// [`AdminError::UnknownUser`], [`AdminError::Store`].
    pub async fn issue_key(&self, user_id: UserId) -> Result<ApiKey, AdminError> {
        for _ in 0..KEY_ATTEMPTS {
            let key = self.ports.ids.api_key();
            match self.ports.accounts.add_key(StoredKey::of(&key, user_id, self.ports.clock.now())).await {
                Ok(()) => {
                    tracing::info!(user_id = %user_id, key_prefix = %key.prefix(), "key issued");
                    return Ok(key);
                }
                Err(AccountError::KeyPrefixTaken) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Internal("could not draw an unused key prefix".into()).into())
    }

    /// Revokes a key by its prefix (or the whole key); it stops working at once.
    ///
    /// # Errors
    /// [`AdminError::UnknownKey`], [`AdminError::Store`].
    pub async fn revoke_key(&self, prefix_or_key: &str) -> Result<(), AdminError> {
        let prefix = KeyPrefix::of(prefix_or_key);
        if self.ports.accounts.revoke_key(&prefix).await? {
            tracing::info!(key_prefix = %prefix, "key revoked");
            Ok(())
        } else {
            Err(AdminError::UnknownKey)
        }
    }

    /// Grants (or, negative, takes away) available credits.
    ///
    /// # Errors
    /// [`AdminError::UnknownUser`], [`AdminError::Invalid`] when a negative grant exceeds
    /// what is available, [`AdminError::Store`].
    pub async fn grant(&self, user_id: UserId, amount: i64) -> Result<Account, AdminError> {
        let account = self.ports.accounts.grant(user_id, amount).await?;
        tracing::info!(user_id = %user_id, amount, "credits granted");
        Ok(account)
    }

    /// A user's account.
    ///
    /// # Errors
    /// [`AdminError::UnknownUser`], [`AdminError::Store`].
    pub async fn user(&self, user_id: UserId) -> Result<Account, AdminError> {
        self.ports.accounts.account(user_id).await?.ok_or(AdminError::UnknownUser)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn new_user_body_is_validated() {
        let ok = NewUserRequest::parse(&json!({"name": "ada", "credits": 10, "max_concurrent_jobs": 2})).unwrap();
        assert_eq!(ok.credits, Credits::new(10));
        assert_eq!(ok.rate_limit_per_minute, None);
        assert_eq!(ok.max_concurrent_jobs, Some(2));
        for (body, param) in [
            (json!({"credits": 1}), "name"),
            (json!({"name": "", "credits": 1}), "name"),
            (json!({"name": "a"}), "credits"),
            (json!({"name": "a", "credits": -1}), "credits"),
            (json!({"name": "a", "credits": 1, "rate_limit_per_minute": 0}), "rate_limit_per_minute"),
            (json!({"name": "a", "credits": 1, "admin": true}), "admin"),
        ] {
            assert_eq!(NewUserRequest::parse(&body).unwrap_err().param.as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn grant_body_is_validated() {
        assert_eq!(parse_grant(&json!({"amount": -5})), Ok(-5));
        assert!(parse_grant(&json!({"amount": 0})).is_err());
        assert!(parse_grant(&json!({"amount": 1.5})).is_err());
        assert!(parse_grant(&json!({})).is_err());
    }
}
