//! Authentication, the caller's account, and the operators' user, key and credit administration.

use std::time::Duration;

use std::sync::Arc;

use super::{Admin, Ports};
use crate::catalog::PricePercent;
use crate::credits::Credits;
use crate::ids::{ApiKey, KeyHash, KeyPrefix, ModelId, UserId};
use crate::invalid::InvalidRequest;
use crate::keys::KeySettings;
use crate::ports::{
    Account, AccountError, AccountStore, Clock, Credential, Limits, RateBucket, RateDecision, RateLimiter, StoreError,
    StoredKey, UsageStore, UserChange, UserQuery,
};

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who is calling.
    pub user_id: UserId,
    /// The key it called with; `None` for a caller the service itself acts for.
    pub key: Option<CallerKey>,
    /// The user's price tier.
    pub price_percent: PricePercent,
}

/// The key a caller presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerKey {
    /// Its prefix.
    pub prefix: KeyPrefix,
    /// What it may do: its own settings narrowed by its ancestors'.
    pub settings: Arc<KeySettings>,
    /// The keys whose jobs, keys, ledger and usage it may see: `None` for a key with its user's
    /// full powers, else its own subtree (itself first, then every key below it).
    pub subtree: Option<Arc<[KeyPrefix]>>,
}

impl Caller {
    /// A caller acting as `user_id` with no key of its own, so without a key's restrictions.
    #[must_use]
    pub fn user(user_id: UserId) -> Self {
        Self { user_id, key: None, price_percent: PricePercent::FULL }
    }

    /// Whether the caller's key may use `model`.
    #[must_use]
    pub fn may_use(&self, model: &ModelId) -> bool {
        self.key.as_ref().is_none_or(|key| key.settings.allows_model(model))
    }

    /// The caller's key's settings; no restriction without a key.
    #[must_use]
    pub fn settings(&self) -> Arc<KeySettings> {
        self.key.as_ref().map_or_else(Arc::default, |key| Arc::clone(&key.settings))
    }

    /// The keys a restricted caller acts within (its own subtree); `None` when it has its
    /// user's full powers.
    #[must_use]
    pub fn subtree(&self) -> Option<&[KeyPrefix]> {
        self.key.as_ref().and_then(|key| key.subtree.as_deref())
    }

    /// Whether the caller may see what was done with the key of `prefix` (`None`: no recorded
    /// key): anything with its user's full powers, only its own subtree when restricted.
    #[must_use]
    pub fn sees_key(&self, prefix: Option<&KeyPrefix>) -> bool {
        self.subtree().is_none_or(|subtree| prefix.is_some_and(|prefix| subtree.contains(prefix)))
    }

    /// Whether the caller is a restricted key, which acts only within its own subtree.
    #[must_use]
    pub fn is_restricted(&self) -> bool {
        self.subtree().is_some()
    }
}

/// Why a request is not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// 401 `INVALID_API_KEY`: no such key, or a revoked one.
    #[error("the API key is not valid")]
    InvalidKey,
    /// 401 `API_KEY_EXPIRED`: the key is past its `expires_at`.
    #[error("the API key expired at {0}")]
    KeyExpired(String),
    /// 429 `RATE_LIMIT_EXCEEDED`.
    #[error("too many requests; retry in {} s", whole_seconds(*.retry_after))]
    RateLimited {
        /// Time until a request would be allowed.
        retry_after: Duration,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// `wait` in whole seconds as a client waits it: rounded up, at least 1, as `Retry-After` says.
#[must_use]
pub fn whole_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
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
            AccountError::GrantBelowZero { .. } | AccountError::GrantTooLarge { .. } => {
                AdminError::Invalid(InvalidRequest::param("amount", e.to_string()))
            }
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
    /// Price tier; the catalog's price when absent.
    pub price_percent: Option<PricePercent>,
}

/// Longest user name, in characters after trimming.
pub const MAX_USER_NAME_CHARS: usize = 200;

impl NewUserRequest {
    /// Checks an operator's new user: a name of 1 to 200 characters (trimmed), an opening grant
    /// that the ledger can count (at most `i64::MAX`), and limits of at least 1 where given.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming the field at fault.
    pub fn validate(
        name: &str,
        credits: u64,
        rate_limit_per_minute: Option<u64>,
        max_concurrent_jobs: Option<u64>,
        price_percent: Option<u64>,
    ) -> Result<Self, InvalidRequest> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_USER_NAME_CHARS {
            return Err(InvalidRequest::param(
                "name",
                format!("`name` must be a string of 1 to {MAX_USER_NAME_CHARS} characters"),
            ));
        }
        if i64::try_from(credits).is_err() {
            return Err(InvalidRequest::param("credits", "`credits` must be a non-negative integer"));
        }
        let limit = |name: &str, value: Option<u64>| {
            value
                .map(|v| {
                    u32::try_from(v)
                        .ok()
                        .filter(|v| *v >= 1)
                        .ok_or_else(|| InvalidRequest::param(name, format!("`{name}` must be a positive integer")))
                })
                .transpose()
        };
        Ok(Self {
            name: name.to_owned(),
            credits: Credits::new(credits),
            rate_limit_per_minute: limit("rate_limit_per_minute", rate_limit_per_minute)?,
            max_concurrent_jobs: limit("max_concurrent_jobs", max_concurrent_jobs)?,
            price_percent: price_percent.map(PricePercent::new).transpose()?,
        })
    }
}

/// Checks an operator's change to a user: limits of at least 1, a tier of 1 to 1,000, each
/// optional.
///
/// # Errors
/// [`InvalidRequest`] naming the field at fault.
pub fn validate_user_change(
    rate_limit_per_minute: Option<u64>,
    max_concurrent_jobs: Option<u64>,
    price_percent: Option<u64>,
) -> Result<UserChange, InvalidRequest> {
    use crate::keys::key_limit;
    Ok(UserChange {
        rate_limit_per_minute: rate_limit_per_minute.map(|v| key_limit("rate_limit_per_minute", v)).transpose()?,
        max_concurrent_jobs: max_concurrent_jobs.map(|v| key_limit("max_concurrent_jobs", v)).transpose()?,
        price_percent: price_percent.map(PricePercent::new).transpose()?,
    })
}

/// Checks an operator's grant: a non-zero number of credits, negative to take away.
///
/// # Errors
/// [`InvalidRequest`] naming `amount`.
pub fn validate_grant(amount: i64) -> Result<i64, InvalidRequest> {
    if amount == 0 {
        return Err(InvalidRequest::param("amount", "`amount` must be a non-zero integer"));
    }
    Ok(amount)
}

/// How often a new key is drawn when its prefix is taken (48 random bits make a second try rare).
pub(super) const KEY_ATTEMPTS: usize = 4;

/// The caller's account: letting a request in, balances, and (in `usage.rs`) the ledger and usage.
#[derive(Clone)]
pub struct Accounts {
    pub(super) ports: AccountPorts,
}

/// The ports of [`Accounts`].
#[derive(Clone)]
pub(super) struct AccountPorts {
    pub(super) accounts: Arc<dyn AccountStore>,
    pub(super) usage: Arc<dyn UsageStore>,
    rate_limiter: Arc<dyn RateLimiter>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) ids: Arc<dyn crate::ports::IdSource>,
}

impl Accounts {
    /// The account use cases over `ports`.
    #[must_use]
    pub fn new(ports: &Ports) -> Self {
        Self {
            ports: AccountPorts {
                accounts: Arc::clone(&ports.accounts),
                usage: Arc::clone(&ports.usage),
                rate_limiter: Arc::clone(&ports.rate_limiter),
                clock: Arc::clone(&ports.clock),
                ids: Arc::clone(&ports.ids),
            },
        }
    }

    /// Lets a request in: the key must be known and not expired (nor any key above it), the user
    /// under its rate limit, and the key and each ancestor under its own when it has one.
    ///
    /// # Errors
    /// See [`AuthError`].
    pub async fn authenticate(&self, presented: &str) -> Result<Caller, AuthError> {
        let key = ApiKey::from_presented(presented);
        self.authenticate_key(&key, &key.hash()).await
    }

    /// [`Accounts::authenticate`] for an edge that has already hashed the presented `key`.
    ///
    /// # Errors
    /// See [`AuthError`].
    pub async fn authenticate_key(&self, key: &ApiKey, hash: &KeyHash) -> Result<Caller, AuthError> {
        let credential = self.credential(key, hash).await?.ok_or(AuthError::InvalidKey)?;
        if credential.settings.is_expired(self.ports.clock.now())
            && let Some(at) = credential.settings.expires_at
        {
            let at = at.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| at.to_string());
            return Err(AuthError::KeyExpired(at));
        }
        let limiter = &self.ports.rate_limiter;
        let user = RateBucket::user(credential.user_id);
        let mut decision = limiter.acquire(user, credential.rate_limit_per_minute).await?;
        // The key's own limit, then each ancestor's: a subtree's requests together stay within
        // the limit of every key above them.
        let own = credential.own_rate_limit_per_minute.map(|limit| (&credential.prefix, limit));
        let ancestors =
            credential.lineage.ancestors.iter().filter_map(|a| a.rate_limit_per_minute.map(|l| (&a.prefix, l)));
        for (prefix, per_minute) in own.into_iter().chain(ancestors) {
            if decision != RateDecision::Allowed {
                break;
            }
            decision = limiter.acquire(RateBucket::key(prefix), per_minute).await?;
        }
        // When a key was last used is for people: a store that cannot record it does not keep
        // the key out.
        if decision == RateDecision::Allowed
            && let Err(error) = self.ports.accounts.record_key_use(&credential.prefix, self.ports.clock.now()).await
        {
            tracing::warn!(key_prefix = %credential.prefix, %error, "the key's use was not recorded");
        }
        match decision {
            RateDecision::Allowed => {
                let restricted = credential.lineage.is_restricted(&credential.settings);
                let subtree = restricted.then(|| {
                    std::iter::once(credential.prefix.clone()).chain(credential.lineage.descendants).collect()
                });
                Ok(Caller {
                    user_id: credential.user_id,
                    key: Some(CallerKey {
                        prefix: credential.prefix,
                        settings: Arc::new(credential.settings),
                        subtree,
                    }),
                    price_percent: credential.price_percent,
                })
            }
            RateDecision::Limited { retry_after } => {
                tracing::info!(user_id = %credential.user_id, key_prefix = %credential.prefix, "rate limited");
                Err(AuthError::RateLimited { retry_after })
            }
        }
    }

    /// Whether `presented` is still a valid key, without spending a request of its rate limit:
    /// what an open stream asks now and then, so that it ends once its key is revoked.
    ///
    /// # Errors
    /// [`StoreError`] when the store fails.
    pub async fn still_valid(&self, presented: &str) -> Result<bool, StoreError> {
        let now = self.ports.clock.now();
        let key = ApiKey::from_presented(presented);
        Ok(self.credential(&key, &key.hash()).await?.is_some_and(|c| !c.settings.is_expired(now)))
    }

    async fn credential(&self, key: &ApiKey, hash: &KeyHash) -> Result<Option<Credential>, StoreError> {
        Ok(self.ports.accounts.credentials(&key.prefix()).await?.into_iter().find(|c| c.hash.matches(hash)))
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
}

impl Admin {
    /// Creates a user with an opening grant and a first key, which is returned only here.
    ///
    /// # Errors
    /// [`AdminError::Store`] when the store fails.
    pub async fn create_user(&self, request: NewUserRequest) -> Result<(Account, ApiKey), AdminError> {
        let now = self.ports.clock.now();
        let user_id = self.ports.ids.user_id(now);
        let limits = Limits {
            rate_limit_per_minute: request.rate_limit_per_minute.unwrap_or(self.default_limits.rate_limit_per_minute),
            max_concurrent_jobs: request.max_concurrent_jobs.unwrap_or(self.default_limits.max_concurrent_jobs),
        };
        for _ in 0..KEY_ATTEMPTS {
            let key = self.ports.ids.api_key();
            let stored = StoredKey::of(&key, user_id, now);
            match self.ports.accounts.create_user(user_id, request.name.clone(), request.credits, limits, stored).await
            {
                Ok(account) => {
                    tracing::info!(user_id = %user_id, credits = %request.credits, "user created");
                    // A tier is set before the key is shown, so no job of the user is priced
                    // without it.
                    let account = match request.price_percent.filter(|p| *p != account.price_percent) {
                        Some(price_percent) => {
                            let change = UserChange { price_percent: Some(price_percent), ..UserChange::default() };
                            self.ports.accounts.change_user(user_id, change).await?.ok_or(AdminError::UnknownUser)?
                        }
                        None => account,
                    };
                    return Ok((account, key));
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

    /// Changes a user's limits and tier, effective on every replica at once.
    ///
    /// # Errors
    /// [`AdminError::UnknownUser`], [`AdminError::Store`].
    pub async fn change_user(&self, user_id: UserId, change: UserChange) -> Result<Account, AdminError> {
        let account = self.ports.accounts.change_user(user_id, change).await?.ok_or(AdminError::UnknownUser)?;
        tracing::info!(
            user_id = %user_id,
            rate_limit_per_minute = change.rate_limit_per_minute,
            max_concurrent_jobs = change.max_concurrent_jobs,
            price_percent = change.price_percent.map(PricePercent::get),
            "user changed"
        );
        Ok(account)
    }

    /// The users `query` selects, newest first.
    ///
    /// # Errors
    /// [`AdminError::Store`].
    pub async fn users(&self, query: &UserQuery) -> Result<Vec<Account>, AdminError> {
        Ok(self.ports.accounts.users(query).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_user_is_validated() {
        let ok = NewUserRequest::validate(" ada ", 10, None, Some(2), Some(150)).unwrap();
        assert_eq!(ok.price_percent.map(PricePercent::get), Some(150));
        assert_eq!((ok.name.as_str(), ok.credits), ("ada", Credits::new(10)));
        assert_eq!((ok.rate_limit_per_minute, ok.max_concurrent_jobs), (None, Some(2)));
        let refusals = [
            (NewUserRequest::validate("", 1, None, None, None), "name"),
            (NewUserRequest::validate(&"x".repeat(201), 1, None, None, None), "name"),
            (NewUserRequest::validate("a", u64::MAX, None, None, None), "credits"),
            (NewUserRequest::validate("a", 1, Some(0), None, None), "rate_limit_per_minute"),
            (NewUserRequest::validate("a", 1, None, Some(u64::from(u32::MAX) + 1), None), "max_concurrent_jobs"),
            (NewUserRequest::validate("a", 1, None, None, Some(0)), "price_percent"),
            (NewUserRequest::validate("a", 1, None, None, Some(1001)), "price_percent"),
        ];
        for (result, param) in refusals {
            assert_eq!(result.unwrap_err().param.as_deref(), Some(param));
        }
    }

    #[test]
    fn a_rate_limits_message_rounds_its_wait_up_as_retry_after_does() {
        let limited = AuthError::RateLimited { retry_after: Duration::from_millis(11_200) };
        assert_eq!(limited.to_string(), "too many requests; retry in 12 s");
        assert_eq!(whole_seconds(Duration::from_millis(10)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(3)), 3);
    }

    #[test]
    fn a_grant_is_not_zero() {
        assert_eq!(validate_grant(-5), Ok(-5));
        assert!(validate_grant(0).is_err());
    }
}
