//! Keys with settings: an operator issues, lists and changes any user's keys; a user issues,
//! lists and revokes their own, no wider than the key they call with.

use time::OffsetDateTime;

use super::accounts::KEY_ATTEMPTS;
use super::{Accounts, Admin, AdminError, Caller};
use crate::catalog::Catalog;
use crate::ids::{ApiKey, KeyPrefix, UserId};
use crate::invalid::InvalidRequest;
use crate::keys::{BudgetStanding, KeyChange, KeySettings};
use crate::ports::{AccountError, AccountStore, IdSource, KeyRecord, StoreError, StoredKey};

/// A key as its listing shows it: the record and where its budget stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyListing {
    /// The key.
    pub record: KeyRecord,
    /// Its budget, what the current period used and when it resets; `None` without a budget.
    pub budget: Option<BudgetStanding>,
}

/// Why a user's own key request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnKeyError {
    /// 404: no key with this prefix among the caller's.
    #[error("no API key with this prefix")]
    UnknownKey,
    /// 403 `KEY_SCOPE_EXCEEDED`: the new key would be wider than the caller's in `field`.
    #[error("a new key may be no wider than the key that makes it: `{field}` is wider than the calling key's")]
    ScopeExceeded {
        /// The field, as the request names it.
        field: &'static str,
    },
    /// 400: the body is not valid.
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AdminError> for OwnKeyError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::UnknownUser => StoreError::Internal("an authenticated user has no account".into()).into(),
            AdminError::UnknownKey => OwnKeyError::UnknownKey,
            AdminError::Invalid(e) => OwnKeyError::Invalid(e),
            AdminError::Store(e) => OwnKeyError::Store(e),
        }
    }
}

/// Refuses settings that name a model the catalog does not have.
fn check_models(catalog: &Catalog, settings: &KeySettings) -> Result<(), InvalidRequest> {
    let unknown = settings.models.iter().flatten().find(|model| catalog.model(model.as_str()).is_none());
    match unknown {
        Some(model) => Err(InvalidRequest::param("models", format!("`models` names an unknown model: `{model}`"))),
        None => Ok(()),
    }
}

/// Issues a key with `settings` to `user_id`, drawing another key in the rare case its prefix is
/// taken.
async fn issue(
    accounts: &dyn AccountStore,
    ids: &dyn IdSource,
    user_id: UserId,
    settings: KeySettings,
    parent: Option<&KeyPrefix>,
    now: OffsetDateTime,
) -> Result<(ApiKey, KeyListing), AdminError> {
    for _ in 0..KEY_ATTEMPTS {
        let key = ids.api_key();
        let stored = StoredKey::of(&key, user_id, now).with_settings(settings.clone()).with_parent(parent.cloned());
        match accounts.add_key(stored).await {
            Ok(()) => {
                tracing::info!(user_id = %user_id, key_prefix = %key.prefix(), "key issued");
                let record = KeyRecord {
                    prefix: key.prefix(),
                    user_id,
                    settings: settings.clone(),
                    parent: parent.cloned(),
                    created_at: now,
                    revoked_at: None,
                    last_used_at: None,
                };
                let listing = listing(accounts, record, now).await?;
                return Ok((key, listing));
            }
            Err(AccountError::KeyPrefixTaken) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Internal("could not draw an unused key prefix".into()).into())
}

/// The listing of `record` at `now`: its budget's standing counted from the current period.
async fn listing(
    accounts: &dyn AccountStore,
    record: KeyRecord,
    now: OffsetDateTime,
) -> Result<KeyListing, StoreError> {
    let budget = match record.settings.budget {
        Some(budget) => Some(BudgetStanding {
            budget,
            used: accounts.key_used(&record.prefix, budget.period.start(now)).await?,
            resets_at: budget.period.resets_at(now),
        }),
        None => None,
    };
    Ok(KeyListing { record, budget })
}

/// The listings of `user_id`'s keys that `shown` lets through.
async fn listings(
    accounts: &dyn AccountStore,
    user_id: UserId,
    now: OffsetDateTime,
    shown: impl Fn(&KeyRecord) -> bool,
) -> Result<Vec<KeyListing>, StoreError> {
    let mut out = Vec::new();
    for record in accounts.keys_of(user_id).await?.into_iter().filter(|record| shown(record)) {
        out.push(listing(accounts, record, now).await?);
    }
    Ok(out)
}

impl Admin {
    /// Issues another key to a user, with `settings`; the key is returned only here.
    ///
    /// # Errors
    /// [`AdminError::UnknownUser`], [`AdminError::Invalid`] naming `models` when one is not in
    /// the catalog, [`AdminError::Store`].
    pub async fn issue_key(&self, user_id: UserId, settings: KeySettings) -> Result<(ApiKey, KeyListing), AdminError> {
        check_models(&self.catalog(), &settings)?;
        let (accounts, ids) = (self.ports.accounts.as_ref(), self.ports.ids.as_ref());
        issue(accounts, ids, user_id, settings, None, self.ports.clock.now()).await
    }

    /// A user's keys, revoked ones included, oldest first.
    ///
    /// # Errors
    /// [`AdminError::UnknownUser`], [`AdminError::Store`].
    pub async fn keys_of(&self, user_id: UserId) -> Result<Vec<KeyListing>, AdminError> {
        if self.ports.accounts.account(user_id).await?.is_none() {
            return Err(AdminError::UnknownUser);
        }
        Ok(listings(self.ports.accounts.as_ref(), user_id, self.ports.clock.now(), |_| true).await?)
    }

    /// Changes a key's settings, on every replica at once.
    ///
    /// # Errors
    /// [`AdminError::UnknownKey`], [`AdminError::Invalid`] naming `models` when one is not in the
    /// catalog, [`AdminError::Store`].
    pub async fn change_key(&self, prefix_or_key: &str, change: &KeyChange) -> Result<KeyListing, AdminError> {
        let prefix = KeyPrefix::of(prefix_or_key);
        let accounts = self.ports.accounts.as_ref();
        let mut record = accounts.key(&prefix).await?.ok_or(AdminError::UnknownKey)?;
        record.settings = change.apply(&record.settings);
        check_models(&self.catalog(), &record.settings)?;
        if !accounts.set_key_settings(&prefix, record.settings.clone()).await? {
            return Err(AdminError::UnknownKey);
        }
        tracing::info!(key_prefix = %prefix, "key changed");
        Ok(listing(accounts, record, self.ports.clock.now()).await?)
    }
}

impl Accounts {
    /// Issues the caller a new key with `settings`, a child of the key it calls with: no wider
    /// than that key's effective settings in any field, and inheriting each field it leaves out.
    ///
    /// # Errors
    /// [`OwnKeyError::ScopeExceeded`] naming the first field that is wider,
    /// [`OwnKeyError::Invalid`], [`OwnKeyError::Store`].
    pub async fn issue_own_key(
        &self,
        caller: &Caller,
        catalog: &Catalog,
        settings: KeySettings,
    ) -> Result<(ApiKey, KeyListing), OwnKeyError> {
        check_models(catalog, &settings)?;
        let parent = caller.settings();
        let settings = settings.inheriting(&parent);
        if let Some(field) = settings.wider_than(&parent) {
            return Err(OwnKeyError::ScopeExceeded { field });
        }
        let ports = &self.ports;
        let maker = caller.key.as_ref().map(|key| &key.prefix);
        let (accounts, ids) = (ports.accounts.as_ref(), ports.ids.as_ref());
        Ok(issue(accounts, ids, caller.user_id, settings, maker, ports.clock.now()).await?)
    }

    /// The caller's keys, revoked ones included, oldest first: the user's every key, or a
    /// restricted key's own subtree.
    ///
    /// # Errors
    /// [`StoreError`] when the store fails.
    pub async fn own_keys(&self, caller: &Caller) -> Result<Vec<KeyListing>, StoreError> {
        let shown = |record: &KeyRecord| caller.sees_key(Some(&record.prefix));
        listings(self.ports.accounts.as_ref(), caller.user_id, self.ports.clock.now(), shown).await
    }

    /// Revokes one of the caller's keys and every key below it; another user's key, or for a
    /// restricted caller a key outside its subtree, is as unknown as a missing one.
    ///
    /// # Errors
    /// [`OwnKeyError::UnknownKey`], [`OwnKeyError::Store`].
    pub async fn revoke_own_key(&self, caller: &Caller, prefix_or_key: &str) -> Result<(), OwnKeyError> {
        let prefix = KeyPrefix::of(prefix_or_key);
        let accounts = self.ports.accounts.as_ref();
        match accounts.key(&prefix).await? {
            Some(record)
                if record.user_id == caller.user_id
                    && record.revoked_at.is_none()
                    && caller.sees_key(Some(&record.prefix)) =>
            {
                accounts.revoke_key(&prefix).await?;
                tracing::info!(user_id = %caller.user_id, key_prefix = %prefix, "own key revoked");
                Ok(())
            }
            _ => Err(OwnKeyError::UnknownKey),
        }
    }
}
