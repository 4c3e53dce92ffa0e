//! The account port's cases: keys and grants.

use std::sync::Arc;

use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, UserId};
use genjobs_domain::ports::{AccountError, StoredKey};

use super::{LIMITS, Store, accepted, b, balances, now, user};

/// A key is found by its prefix with its hash and owner; once revoked it is gone.
pub async fn keys_are_found_by_prefix_and_revoked_at_once<S: Store>(store: Arc<S>) {
    let id = user(&*store, 1).await;
    let key = ApiKey::generate();
    store.add_key(StoredKey::of(&key, id, now())).await.expect("add key");
    let found = store.credentials(&key.prefix()).await.unwrap();
    assert_eq!(found.len(), 1);
    assert!(found[0].hash.matches(&key.hash()));
    assert_eq!((found[0].user_id, found[0].rate_limit_per_minute), (id, 120));
    assert!(store.revoke_key(&key.prefix()).await.unwrap());
    assert!(store.credentials(&key.prefix()).await.unwrap().is_empty());
    assert!(!store.revoke_key(&key.prefix()).await.unwrap());
    let ghost = StoredKey::of(&ApiKey::generate(), UserId::new_at(now()), now());
    assert_eq!(store.add_key(ghost).await, Err(AccountError::UnknownUser));
}

/// Two keys never share a prefix.
pub async fn key_prefixes_are_unique<S: Store>(store: Arc<S>) {
    let id = user(&*store, 1).await;
    let key = ApiKey::generate();
    store.add_key(StoredKey::of(&key, id, now())).await.expect("add key");
    let twin = StoredKey { hash: ApiKey::generate().hash(), ..StoredKey::of(&key, id, now()) };
    assert_eq!(store.add_key(twin.clone()).await, Err(AccountError::KeyPrefixTaken));
    let other = UserId::new_at(now());
    let created = store.create_user(other, "x".into(), Credits::ZERO, LIMITS, twin).await;
    assert_eq!(created, Err(AccountError::KeyPrefixTaken));
}

/// Grants change only `available`; one below zero is refused and changes nothing.
pub async fn grants_move_available_credits_only<S: Store>(store: Arc<S>) {
    let id = user(&*store, 50).await;
    accepted(&*store, id, 20).await;
    assert_eq!(store.grant(id, 10).await.unwrap().balances, b(40, 20, 0));
    assert_eq!(store.grant(id, -40).await.unwrap().balances, b(0, 20, 0));
    assert!(matches!(store.grant(id, -1).await, Err(AccountError::GrantBelowZero { .. })));
    assert_eq!(balances(&*store, id).await.0, b(0, 20, 0));
    assert_eq!(store.grant(id, i64::MAX).await, Err(AccountError::GrantTooLarge { amount: i64::MAX }));
    // 20 granted so far (50 + 10 - 40): the limit is reached exactly, and not passed.
    assert_eq!(store.grant(id, i64::MAX - 20).await.unwrap().balances.total(), i64::MAX as u128, "up to the limit");
    assert!(matches!(store.grant(id, 1).await, Err(AccountError::GrantTooLarge { .. })));
    assert_eq!(store.grant(id, -(i64::MAX - 20)).await.unwrap().balances, b(0, 20, 0));
    assert_eq!(store.grant(UserId::new_at(now()), 1).await, Err(AccountError::UnknownUser));
}
