//! The cases of the key tree: a key made with another is its child; its credentials carry its
//! settings narrowed by every ancestor's and its lineage; revoking a key revokes its subtree; a
//! job counts against the budget and concurrency limit of its key and every ancestor, exactly
//! under concurrent accepts; a subtree's jobs, ledger and usage are found by its keys.

use std::sync::Arc;

use futures_util::future::join_all;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, KeyPrefix, ModelId, UserId};
use genjobs_domain::job::Trigger;
use genjobs_domain::keys::{BudgetOwner, BudgetPeriod, KeySettings};
use genjobs_domain::ports::{AcceptError, Accepted, JobFilter, Limits, StoredKey, UsageGrouping, UsageQuery};
use time::Duration;

use super::keys::{budget, keyed_job};
use super::{Store, now, user, user_with};

/// A user whose own concurrency limit leaves the keys' limits to bind.
async fn busy_user<S: Store>(store: &S, credits: u64) -> UserId {
    user_with(store, credits, Limits { rate_limit_per_minute: 1000, max_concurrent_jobs: 100 }).await
}

/// A key of `user_id` with `settings`, a child of the key of `parent`, added to `store`.
pub async fn child_key<S: Store>(store: &S, user_id: UserId, parent: &KeyPrefix, settings: KeySettings) -> KeyPrefix {
    let key = ApiKey::generate();
    let stored = StoredKey::of(&key, user_id, now()).with_settings(settings).with_parent(Some(parent.clone()));
    store.add_key(stored).await.expect("add a child key");
    key.prefix()
}

async fn accept<S: Store>(store: &S, user_id: UserId, prefix: &KeyPrefix, held: u64) -> Result<Accepted, AcceptError> {
    store.accept(keyed_job(user_id, prefix, held), None, None, now()).await
}

/// A child key is kept with its parent; its credentials are its settings narrowed by every
/// ancestor's (models intersected, the earliest expiry, the lowest limits) with its lineage, and
/// an ancestor's credentials list it among its descendants.
pub async fn a_child_keys_credentials_are_narrowed_by_its_ancestors<S: Store>(store: Arc<S>) {
    let id = user(&*store, 10).await;
    let (a, b) = (ModelId::new("nano-banana"), ModelId::new("flux-pro"));
    let soon = now() + Duration::hours(1);
    let root_settings = KeySettings {
        models: Some(vec![a.clone(), b.clone()]),
        expires_at: Some(soon),
        rate_limit_per_minute: Some(10),
        ..budget(100, BudgetPeriod::Day)
    };
    let root = super::key_with(&*store, id, root_settings).await;
    let middle = child_key(&*store, id, &root, KeySettings::default()).await;
    let leaf_settings = KeySettings {
        models: Some(vec![b.clone()]),
        expires_at: Some(soon + Duration::days(1)),
        rate_limit_per_minute: Some(30),
        max_concurrent_jobs: Some(2),
        ..KeySettings::default()
    };
    let leaf = child_key(&*store, id, &middle, leaf_settings).await;

    assert_eq!(store.key(&leaf).await.unwrap().expect("kept").parent, Some(middle.clone()));
    assert_eq!(store.key(&root).await.unwrap().expect("kept").parent, None);
    let credential = store.credentials(&leaf).await.unwrap().pop().expect("the leaf's credentials");
    let effective = &credential.settings;
    assert_eq!(effective.models, Some(vec![b]), "the models every key of the chain allows");
    assert_eq!(effective.expires_at, Some(soon), "the earliest expiry");
    assert_eq!((effective.rate_limit_per_minute, effective.max_concurrent_jobs), (Some(10), Some(2)));
    assert_eq!(credential.own_rate_limit_per_minute, Some(30));
    let ancestors: Vec<_> = credential.lineage.ancestors.iter().map(|a| (a.prefix.clone(), a.limits_jobs)).collect();
    assert_eq!(ancestors, [(middle.clone(), false), (root.clone(), true)], "parent first");
    let below = store.credentials(&root).await.unwrap().pop().expect("the root's credentials").lineage.descendants;
    assert_eq!(below.len(), 2);
    assert!(below.contains(&middle) && below.contains(&leaf), "{below:?}");
}

/// Revoking a key revokes its subtree, on the listing too; its ancestors go on.
pub async fn revoking_a_key_revokes_its_subtree<S: Store>(store: Arc<S>) {
    let id = user(&*store, 10).await;
    let root = super::key_with(&*store, id, KeySettings::default()).await;
    let middle = child_key(&*store, id, &root, KeySettings::default()).await;
    let leaf = child_key(&*store, id, &middle, KeySettings::default()).await;
    assert_eq!(store.credentials(&leaf).await.unwrap().len(), 1, "cached before the revocation");
    assert!(store.revoke_key(&middle).await.unwrap());
    for revoked in [&middle, &leaf] {
        assert!(store.credentials(revoked).await.unwrap().is_empty(), "{revoked} no longer lets anyone in");
        assert!(store.key(revoked).await.unwrap().expect("listed").revoked_at.is_some());
    }
    assert_eq!(store.credentials(&root).await.unwrap().len(), 1, "the parent goes on");
    assert!(!store.revoke_key(&leaf).await.unwrap(), "already revoked with its parent");
}

/// A job counts against the budget of its key and of every ancestor, each counting its whole
/// subtree's jobs, and against each one's concurrency limit; a refusal by an ancestor's budget
/// says so.
pub async fn a_subtrees_jobs_count_against_every_ancestors_budget_and_limit<S: Store>(store: Arc<S>) {
    let id = busy_user(&*store, 1000).await;
    let since = BudgetPeriod::Day.start(now());
    let root = super::key_with(&*store, id, budget(50, BudgetPeriod::Day)).await;
    let child = child_key(&*store, id, &root, KeySettings::default()).await;
    let grandchild = child_key(&*store, id, &child, budget(40, BudgetPeriod::Day)).await;
    assert!(matches!(accept(&*store, id, &child, 30).await, Ok(Accepted::Created(_))));
    let refused = accept(&*store, id, &grandchild, 25).await;
    assert!(
        matches!(refused, Err(AcceptError::KeyBudgetExceeded(e)) if e.whose == BudgetOwner::Ancestor && e.used == Credits::new(30)),
        "within its own budget, past its grandparent's: {refused:?}"
    );
    assert!(matches!(accept(&*store, id, &root, 20).await, Ok(Accepted::Created(_))), "the root's own job");
    assert_eq!(store.key_used(&root, since).await.unwrap(), Credits::new(50), "its own job and its child's");
    assert_eq!(store.key_used(&child, since).await.unwrap(), Credits::new(30));
    assert!(matches!(accept(&*store, id, &root, 1).await, Err(AcceptError::KeyBudgetExceeded(_))));

    let limited =
        super::key_with(&*store, id, KeySettings { max_concurrent_jobs: Some(2), ..KeySettings::default() }).await;
    let (left, right) = (
        child_key(&*store, id, &limited, KeySettings::default()).await,
        child_key(&*store, id, &limited, KeySettings::default()).await,
    );
    let running = match accept(&*store, id, &left, 1).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("{other:?}"),
    };
    assert!(matches!(accept(&*store, id, &right, 1).await, Ok(Accepted::Created(_))));
    for prefix in [&left, &right, &limited] {
        let refused = accept(&*store, id, prefix, 1).await;
        assert_eq!(refused, Err(AcceptError::KeyConcurrencyLimit { limit: 2 }), "{prefix}: the parent's limit");
    }
    super::step(&*store, &running, Trigger::Cancel).await;
    assert!(matches!(accept(&*store, id, &right, 1).await, Ok(Accepted::Created(_))), "a slot freed");
}

/// Concurrent accepts through three children never take their parent's `used` past its budget.
pub async fn concurrent_accepts_of_children_never_pass_their_parents_budget<S: Store>(store: Arc<S>) {
    let id = busy_user(&*store, 10_000).await;
    let parent = super::key_with(&*store, id, budget(50, BudgetPeriod::Day)).await;
    let mut children = Vec::new();
    for _ in 0..3 {
        children.push(child_key(&*store, id, &parent, budget(50, BudgetPeriod::Day)).await);
    }
    let tasks = (0..24).map(|n| {
        let (store, prefix) = (Arc::clone(&store), children[n % 3].clone());
        tokio::spawn(async move {
            match accept(&*store, id, &prefix, 7).await {
                Ok(Accepted::Created(job)) => Some(job),
                Err(AcceptError::KeyBudgetExceeded(_) | AcceptError::ConcurrencyLimit { .. }) => None,
                other => panic!("{other:?}"),
            }
        })
    });
    let created = join_all(tasks).await.into_iter().filter_map(|r| r.expect("task")).count();
    let used = store.key_used(&parent, BudgetPeriod::Day.start(now())).await.unwrap();
    assert!(used <= Credits::new(50), "used {used} passed the parent's budget");
    assert_eq!(used, Credits::new(7 * u64::try_from(created).unwrap_or(0)));
    assert_eq!(created, 7, "every hold that fits was taken");
}

/// A subtree's jobs, their ledger records and their usage are found by its keys, and no other.
pub async fn a_subtrees_jobs_ledger_and_usage_are_found_by_its_keys<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let main = super::key_with(&*store, id, KeySettings::default()).await;
    let child = child_key(&*store, id, &main, KeySettings::default()).await;
    let mine = match accept(&*store, id, &child, 3).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("{other:?}"),
    };
    let theirs = match accept(&*store, id, &main, 5).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("{other:?}"),
    };
    let subtree = vec![child.clone()];
    let filter = JobFilter { user_id: Some(id), keys: Some(subtree.clone()), ..JobFilter::default() };
    let found: Vec<_> = store.find_jobs(&filter, None, 10).await.unwrap().iter().map(|job| job.id()).collect();
    assert_eq!(found, [mine.id()]);
    let records = store.ledger(id, Some(subtree.clone()), None, 10).await.unwrap();
    assert_eq!(records.iter().map(|r| r.job_id).collect::<Vec<_>>(), [Some(mine.id())], "no grant, no other job");
    assert!(store.ledger(id, None, None, 10).await.unwrap().iter().any(|r| r.job_id == Some(theirs.id())));
    let day = now().date();
    let query = UsageQuery { user_id: Some(id), keys: Some(subtree), from: day, to: day, group_by: UsageGrouping::Key };
    let rows = store.usage(query).await.unwrap();
    assert_eq!(rows.iter().map(|row| (row.key.clone(), row.jobs)).collect::<Vec<_>>(), [(Some(child.to_string()), 1)]);
}
