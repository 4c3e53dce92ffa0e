//! [`KeptSecrets`]: what the service keeps with its store so that every start and every replica
//! over the same store finds the same keys without the operator having set them.

use async_trait::async_trait;

use super::StoreError;

/// What the service keeps under a name of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeptName {
    /// The random key users' webhook secrets are sealed under when `GENJOBS_SECRET_KEY` is unset.
    WebhookSecretKey,
    /// The random key output links are signed under when `GENJOBS_LINK_SECRET` is unset.
    LinkKey,
    /// The SHA-256 of the admin token generated at the first start, when `GENJOBS_ADMIN_TOKEN`
    /// is unset: the token itself is never kept.
    AdminTokenHash,
}

impl KeptName {
    /// The name as a store keeps it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WebhookSecretKey => "webhook_secret_key",
            Self::LinkKey => "link_key",
            Self::AdminTokenHash => "admin_token_sha256",
        }
    }
}

/// The value kept under a name, and whether this call is the one that kept it.
#[derive(Clone, PartialEq, Eq)]
pub struct Kept {
    /// The bytes kept.
    pub value: Vec<u8>,
    /// True when the candidate of this call was kept (nothing was before it).
    pub made_now: bool,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept").field("made_now", &self.made_now).finish_non_exhaustive()
    }
}

/// Secrets made once and kept for every later start. Whoever can read the store can read them.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] when the backing store cannot be reached,
/// and [`StoreError::Internal`] for anything else unexpected.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait KeptSecrets: Send + Sync {
    /// The value kept under `name`; when there is none, keeps `candidate` and returns it with
    /// `made_now`. Of callers racing on an empty name, exactly one keeps its candidate and every
    /// one gets that value.
    async fn keep_first(&self, name: KeptName, candidate: Vec<u8>) -> Result<Kept, StoreError>;

    /// Keeps `value` under `name` in place of what was kept there.
    async fn replace(&self, name: KeptName, value: Vec<u8>) -> Result<(), StoreError>;
}
