//! The account port's cases: keys, grants, users' limits and tiers, and the listing of users.

use std::sync::Arc;

use genjobs_domain::catalog::PricePercent;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, UserId};
use genjobs_domain::job::Job;
use genjobs_domain::ports::{Account, AccountError, StoredKey, UserChange, UserQuery};

use super::{LIMITS, Store, accepted, b, balances, new_job, now, user};

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

/// A change to a user's limits and tier applies to the account and to its keys' credentials at
/// once; a change of nobody says so.
pub async fn a_users_limits_and_tier_change_with_its_credentials<S: Store>(store: Arc<S>) {
    let id = user(&*store, 10).await;
    let key = ApiKey::generate();
    store.add_key(StoredKey::of(&key, id, now())).await.expect("add key");
    let account = store.account(id).await.unwrap().expect("user");
    assert_eq!(account.price_percent, PricePercent::FULL);
    let tier = PricePercent::new(150).unwrap();
    let change = UserChange { max_concurrent_jobs: Some(9), price_percent: Some(tier), ..UserChange::default() };
    let changed = store.change_user(id, change).await.unwrap().expect("changed");
    assert_eq!(
        (changed.limits.max_concurrent_jobs, changed.limits.rate_limit_per_minute),
        (9, LIMITS.rate_limit_per_minute)
    );
    assert_eq!((changed.price_percent, changed.created_at), (tier, account.created_at));
    let credential = store.credentials(&key.prefix()).await.unwrap().remove(0);
    assert_eq!(credential.price_percent, tier, "the key's credentials follow the change at once");
    assert_eq!(store.change_user(UserId::new_at(now()), change).await.unwrap(), None);
}

/// A job accepted at a tier keeps it: its stored rate is read back as it was accepted.
pub async fn a_jobs_tier_is_kept_with_it<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let tier = PricePercent::new(250).unwrap();
    let job = new_job(id, 4, now());
    let job =
        Job::accept(job.id(), id, job.model().clone(), job.modality(), job.input().clone(), job.rate().at(tier), now())
            .0;
    assert_eq!(job.credits_held(), Credits::new(10));
    store.accept(job.clone(), None, None, now()).await.expect("accepted");
    assert_eq!(store.job(job.id()).await.unwrap().expect("stored").rate().percent, tier);
}

/// Users are listed newest first, in pages, by the beginning of a name or of a key prefix.
pub async fn users_are_listed_newest_first_by_name_or_key_prefix<S: Store>(store: Arc<S>) {
    let mut ids = Vec::new();
    for name in ["ada", "adam", "bob"] {
        let id = UserId::new_at(now());
        let key = ApiKey::generate();
        store.create_user(id, name.into(), Credits::ZERO, LIMITS, StoredKey::of(&key, id, now())).await.expect("user");
        ids.push((id, key));
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let page = |q: Option<&str>, before, limit| UserQuery { q: q.map(str::to_owned), before, limit };
    let listed = |users: Vec<Account>| users.into_iter().map(|a| a.user_id).collect::<Vec<_>>();
    let all = listed(store.users(&page(None, None, 100)).await.unwrap());
    let mine: Vec<UserId> = all.iter().copied().filter(|id| ids.iter().any(|(u, _)| u == id)).collect();
    assert_eq!(mine, vec![ids[2].0, ids[1].0, ids[0].0], "newest first");
    assert_eq!(listed(store.users(&page(Some("ad"), None, 100)).await.unwrap()), vec![ids[1].0, ids[0].0]);
    assert_eq!(listed(store.users(&page(Some("ad"), Some(ids[1].0), 100)).await.unwrap()), vec![ids[0].0]);
    assert_eq!(store.users(&page(Some("ad"), None, 1)).await.unwrap().len(), 1);
    let by_key = ids[2].1.prefix().as_str().to_owned();
    assert_eq!(listed(store.users(&page(Some(&by_key), None, 100)).await.unwrap()), vec![ids[2].0]);
    assert!(store.users(&page(Some("a%"), None, 100)).await.unwrap().is_empty(), "no pattern characters");
}
