//! Users' webhook secrets, sealed: `nonce ‖ ChaCha20-Poly1305(secret)`, under a key derived from
//! the operator's secret key. Every replica configured alike opens every other's. A vault may
//! also open secrets sealed under an earlier key (`also_opening`), so that an upgrade that moves
//! the key leaves the secrets sealed before readable; it seals under its own key only.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use genjobs_domain::ports::{SecretVault, StoreError};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

/// Bytes of a generated secret's key.
const SECRET_BYTES: usize = 32;

/// The Standard Webhooks prefix of a secret.
const PREFIX: &str = "whsec_";

/// Makes, seals and opens webhook secrets.
pub struct SealedSecrets {
    key: LessSafeKey,
    earlier: Vec<LessSafeKey>,
    random: SystemRandom,
}

impl std::fmt::Debug for SealedSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedSecrets").finish_non_exhaustive()
    }
}

impl SealedSecrets {
    /// Secrets sealed under a key derived from `secret_key` (any length; hashed).
    #[must_use]
    pub fn new(secret_key: &str) -> Self {
        Self { key: sealing_key(secret_key), earlier: Vec::new(), random: SystemRandom::new() }
    }

    /// The same vault, opening also what was sealed under `earlier_secret_key`.
    #[must_use]
    pub fn also_opening(mut self, earlier_secret_key: &str) -> Self {
        self.earlier.push(sealing_key(earlier_secret_key));
        self
    }

    fn random<const N: usize>(&self) -> [u8; N] {
        let mut bytes = [0u8; N];
        // The system's generator fails only where the process cannot run at all.
        if self.random.fill(&mut bytes).is_err() {
            panic!("the system's random number generator failed");
        }
        bytes
    }
}

fn sealing_key(secret_key: &str) -> LessSafeKey {
    let digest = Sha256::new().chain_update(b"genjobs webhook secrets\n").chain_update(secret_key).finalize();
    UnboundKey::new(&CHACHA20_POLY1305, &digest)
        .map(LessSafeKey::new)
        .unwrap_or_else(|_| unreachable!("a SHA-256 digest is a ChaCha20 key"))
}

impl SecretVault for SealedSecrets {
    fn generate(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(self.random::<SECRET_BYTES>()))
    }

    fn seal(&self, secret: &str) -> Vec<u8> {
        let nonce = self.random::<NONCE_LEN>();
        let mut sealed = secret.as_bytes().to_vec();
        if self.key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut sealed).is_err() {
            panic!("a secret of a few dozen bytes is always sealable");
        }
        [nonce.as_slice(), &sealed].concat()
    }

    fn open(&self, sealed: &[u8]) -> Result<String, StoreError> {
        let broken = || StoreError::Internal("a webhook secret cannot be opened: GENJOBS_SECRET_KEY changed?".into());
        if sealed.len() < NONCE_LEN {
            return Err(broken());
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
        for key in std::iter::once(&self.key).chain(&self.earlier) {
            let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| broken())?;
            let mut buffer = ciphertext.to_vec();
            if let Ok(plain) = key.open_in_place(nonce, Aad::empty(), &mut buffer) {
                return String::from_utf8(plain.to_vec()).map_err(|_| broken());
            }
        }
        Err(broken())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_standard_and_open_only_under_their_key() {
        let vault = SealedSecrets::new("key one");
        let secret = vault.generate();
        let key = secret.strip_prefix(PREFIX).map(|b64| STANDARD.decode(b64));
        assert!(matches!(key, Some(Ok(bytes)) if bytes.len() == SECRET_BYTES), "{secret}");
        assert_ne!(vault.generate(), secret);
        let sealed = vault.seal(&secret);
        assert!(!sealed.windows(secret.len()).any(|w| w == secret.as_bytes()), "not in clear");
        assert_eq!(vault.open(&sealed), Ok(secret.clone()));
        assert_eq!(SealedSecrets::new("key one").open(&sealed), Ok(secret), "another replica, same key");
        assert!(SealedSecrets::new("key two").open(&sealed).is_err());
        assert!(vault.open(b"short").is_err());
    }

    #[test]
    fn a_vault_opens_what_an_earlier_key_sealed_and_seals_under_its_own() {
        let before = SealedSecrets::new("the earlier key");
        let sealed_before = before.seal("whsec_before");
        let upgraded = SealedSecrets::new("the kept key").also_opening("the earlier key");
        assert_eq!(upgraded.open(&sealed_before), Ok("whsec_before".to_owned()));
        let sealed_now = upgraded.seal("whsec_now");
        assert!(before.open(&sealed_now).is_err(), "sealed under the vault's own key");
        assert_eq!(SealedSecrets::new("the kept key").open(&sealed_now), Ok("whsec_now".to_owned()));
    }
}
