//! Identifiers and secrets, parsed once at the edge and trusted everywhere after.

use std::fmt;
use std::sync::{Mutex, PoisonError};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use time::OffsetDateTime;
use uuid::{ContextV7, Timestamp, Uuid};

/// A string that does not name a job, a user or a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid identifier: {0:?}")]
pub struct InvalidId(pub String);

/// One counter for the process, so that ids made in the same millisecond still sort in the order
/// they were made: listings page by id, newest first.
static V7_CONTEXT: Mutex<ContextV7> = Mutex::new(ContextV7::new());

fn uuid_v7_at(at: OffsetDateTime) -> Uuid {
    let nanos = at.unix_timestamp_nanos();
    let secs = u64::try_from(nanos.div_euclid(1_000_000_000)).unwrap_or(0);
    let subsec = u32::try_from(nanos.rem_euclid(1_000_000_000)).unwrap_or(0);
    let context = V7_CONTEXT.lock().unwrap_or_else(PoisonError::into_inner);
    Uuid::new_v7(Timestamp::from_unix(&*context, secs, subsec))
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
                pub struct $name(Uuid);

        impl $name {
            /// A new time-ordered id (UUID v7) for something created at `at`.
            #[must_use]
            pub fn new_at(at: OffsetDateTime) -> Self {
                Self(uuid_v7_at(at))
            }

            /// Parses the hyphenated UUID form that the API shows.
            ///
            /// # Errors
            /// [`InvalidId`] when `text` is not a UUID.
            pub fn parse(text: &str) -> Result<Self, InvalidId> {
                Uuid::try_parse(text).map(Self).map_err(|_| InvalidId(text.to_owned()))
            }

            /// The underlying UUID, for adapters that store it natively.
            #[must_use]
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }

            /// Wraps a UUID read back from storage.
            #[must_use]
            pub fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }
    };
}

uuid_id!(
    /// Identifies a job; a UUID v7, so ids sort by creation time.
    JobId
);
uuid_id!(
    /// Identifies a batch of jobs; a UUID v7, so ids sort by creation time.
    BatchId
);
uuid_id!(
    /// Identifies a file uploaded for OpenAI's Batch API; a UUID v7, so ids sort by creation time.
    FileId
);
uuid_id!(
    /// Identifies a user (an account holding credits and keys).
    UserId
);
uuid_id!(
    /// Identifies a driver's lease: every job the driver claims, or is handed, is under it, and
    /// one renewal keeps them all. A lease that ran out never lives again; the driver goes on
    /// under a new one.
    LeaseId
);

/// A model id as found in the catalog, e.g. `seedance-2.0-fast`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize, serde::Serialize)]
#[serde(transparent)]
pub struct ModelId(String);

impl ModelId {
    /// Wraps a model id; whether the catalog knows it is checked where it is looked up.
    #[must_use]
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Length of the public prefix of an API key: `gj_` and 12 hex digits (48 random bits), enough to
/// tell keys apart for revocation without revealing the secret part.
pub const KEY_PREFIX_LEN: usize = 15;

/// An API key as a client presents it. Only its [`KeyHash`] is ever stored.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A fresh random key: `gj_` followed by 32 hex digits (122 random bits).
    #[must_use]
    pub fn generate() -> Self {
        Self(format!("gj_{}", Uuid::new_v4().simple()))
    }

    /// Wraps a key presented by a client; an unknown key simply matches nothing.
    #[must_use]
    pub fn from_presented(text: &str) -> Self {
        Self(text.to_owned())
    }

    /// The key as text, to show once to whoever created it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The public prefix under which the key is stored and revoked.
    #[must_use]
    pub fn prefix(&self) -> KeyPrefix {
        KeyPrefix::of(&self.0)
    }

    /// The SHA-256 of the key, the only form in which it is stored.
    #[must_use]
    pub fn hash(&self) -> KeyHash {
        KeyHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({}…)", self.prefix())
    }
}

/// The first [`KEY_PREFIX_LEN`] characters of a key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyPrefix(String);

impl KeyPrefix {
    /// The prefix of `text`, which may be a whole key or already a prefix.
    #[must_use]
    pub fn of(text: &str) -> Self {
        Self(text.chars().take(KEY_PREFIX_LEN).collect())
    }

    /// The prefix as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// SHA-256 of an API key; compared in constant time.
#[derive(Clone, Copy)]
pub struct KeyHash([u8; 32]);

impl KeyHash {
    /// Wraps a digest read back from storage.
    #[must_use]
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The digest bytes, for storage.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Constant-time equality, so that timing tells an attacker nothing about a stored hash.
    #[must_use]
    pub fn matches(&self, other: &KeyHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyHash(…)")
    }
}

/// The operators' bearer token for `/api/admin`.
#[derive(Clone)]
pub struct AdminToken(KeyHash);

impl AdminToken {
    /// Wraps the configured token.
    #[must_use]
    pub fn new(token: &str) -> Self {
        Self(ApiKey::from_presented(token).hash())
    }

    /// The token whose hash was kept, when the token itself was shown once and never kept.
    #[must_use]
    pub fn from_hash(hash: KeyHash) -> Self {
        Self(hash)
    }

    /// The token's hash, to keep.
    #[must_use]
    pub fn hash(&self) -> &KeyHash {
        &self.0
    }

    /// Whether `presented` is the token; hashing first makes the comparison independent of length.
    #[must_use]
    pub fn verify(&self, presented: &str) -> bool {
        self.0.matches(&ApiKey::from_presented(presented).hash())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_distinct_and_well_formed() {
        let a = ApiKey::generate();
        let b = ApiKey::generate();
        assert_ne!(a.expose(), b.expose());
        assert!(a.expose().starts_with("gj_"));
        assert_eq!(a.expose().len(), 35);
        assert_eq!(a.prefix().as_str().len(), KEY_PREFIX_LEN);
        assert!(a.expose().starts_with(a.prefix().as_str()));
    }

    #[test]
    fn key_hash_matches_only_the_same_key() {
        let key = ApiKey::generate();
        assert!(key.hash().matches(&ApiKey::from_presented(key.expose()).hash()));
        assert!(!key.hash().matches(&ApiKey::generate().hash()));
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let key = ApiKey::generate();
        assert!(!format!("{key:?}").contains(&key.expose()[KEY_PREFIX_LEN..]));
    }

    #[test]
    fn admin_token_verifies_exactly() {
        let token = AdminToken::new("s3cret");
        assert!(token.verify("s3cret"));
        assert!(!token.verify("s3cret "));
        assert!(!token.verify(""));
    }

    #[test]
    fn ids_made_in_the_same_millisecond_keep_their_order() {
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let ids: Vec<JobId> = (0..1000).map(|_| JobId::new_at(at)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn job_ids_are_time_ordered_and_round_trip() {
        let early = JobId::new_at(OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(10));
        let late = JobId::new_at(OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(20));
        assert!(early < late);
        assert_eq!(JobId::parse(&early.to_string()), Ok(early));
        assert!(JobId::parse("not-a-uuid").is_err());
    }
}
