//! The cases of keys with settings: kept, listed and changed; a key's jobs carry its prefix and
//! count against its budget and its concurrency limit, in the same atomic step as their hold.

use std::sync::Arc;

use futures_util::future::join_all;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, KeyPrefix, ModelId, UserId};
use genjobs_domain::job::{Job, Trigger};
use genjobs_domain::keys::{BudgetExceeded, BudgetOwner, BudgetPeriod, KeyBudget, KeySettings};
use genjobs_domain::ports::{AcceptError, Accepted, StoredKey};
use time::Duration;

use super::{Store, accepted, b, balances, new_job, now, step, submitted, success, user};

/// A key of `user_id` with `settings`, added to `store`.
pub async fn key_with<S: Store>(store: &S, user_id: UserId, settings: KeySettings) -> KeyPrefix {
    let key = ApiKey::generate();
    store.add_key(StoredKey::of(&key, user_id, now()).with_settings(settings)).await.expect("add key");
    key.prefix()
}

/// A key's settings of a budget of `credits` per `period`.
pub fn budget(credits: u64, period: BudgetPeriod) -> KeySettings {
    KeySettings { budget: Some(KeyBudget { credits: Credits::new(credits), period }), ..KeySettings::default() }
}

/// A job of `user_id` holding `held`, submitted with the key of `prefix`.
pub fn keyed_job(user_id: UserId, prefix: &KeyPrefix, held: u64) -> Job {
    new_job(user_id, held, now()).with_key_prefix(Some(prefix.clone()))
}

/// A key's settings are kept with it, listed (revoked keys too, with when) and changed whole.
pub async fn key_settings_are_kept_listed_and_changed<S: Store>(store: Arc<S>) {
    let id = user(&*store, 10).await;
    let settings = KeySettings {
        name: Some("ci".into()),
        models: Some(vec![ModelId::new("nano-banana")]),
        expires_at: Some(now() + Duration::days(3)),
        rate_limit_per_minute: Some(5),
        max_concurrent_jobs: Some(2),
        ..budget(40, BudgetPeriod::Week)
    };
    let prefix = key_with(&*store, id, settings.clone()).await;
    let record = store.key(&prefix).await.unwrap().expect("kept");
    assert_eq!((record.user_id, &record.settings, record.revoked_at), (id, &settings, None));
    assert_eq!(store.credentials(&prefix).await.unwrap()[0].settings, settings);
    let listed = store.keys_of(id).await.unwrap();
    assert_eq!(listed.len(), 2, "the user's first key and this one");
    assert_eq!(listed.last().map(|k| &k.prefix), Some(&prefix), "oldest first");

    let changed = KeySettings { name: None, budget: None, ..settings };
    assert!(store.set_key_settings(&prefix, changed.clone()).await.unwrap());
    assert_eq!(store.key(&prefix).await.unwrap().expect("kept").settings, changed);
    assert_eq!(store.credentials(&prefix).await.unwrap()[0].settings, changed, "credentials read the change");

    assert_eq!(store.key(&prefix).await.unwrap().expect("kept").last_used_at, None, "not used yet");
    let used_at = now();
    store.record_key_use(&prefix, used_at).await.unwrap();
    assert_eq!(store.key(&prefix).await.unwrap().expect("kept").last_used_at, Some(used_at), "the first use at once");

    assert!(store.revoke_key(&prefix).await.unwrap());
    let revoked = store.key(&prefix).await.unwrap().expect("a revoked key stays");
    assert!(revoked.revoked_at.is_some());
    assert_eq!(store.keys_of(id).await.unwrap().len(), 2);
    assert!(!store.set_key_settings(&KeyPrefix::of("gj_unknown00"), KeySettings::default()).await.unwrap());
    assert_eq!(store.key(&KeyPrefix::of("gj_unknown00")).await.unwrap(), None);
}

/// A key's `used` counts the holds of its jobs not yet final and the charges of its succeeded
/// ones; a hold that would pass the budget is refused and holds nothing; releases give back.
pub async fn a_keys_jobs_count_against_its_budget<S: Store>(store: Arc<S>) {
    let id = user(&*store, 1000).await;
    let prefix = key_with(&*store, id, budget(50, BudgetPeriod::Day)).await;
    let since = BudgetPeriod::Day.start(now());
    let first = match store.accept(keyed_job(id, &prefix, 30), None, None, now()).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("{other:?}"),
    };
    assert_eq!(store.job(first.id()).await.unwrap().expect("stored").key_prefix(), Some(&prefix));
    assert_eq!(store.key_used(&prefix, since).await.unwrap(), Credits::new(30));
    let refused = store.accept(keyed_job(id, &prefix, 30), None, None, now()).await;
    let day = KeyBudget { credits: Credits::new(50), period: BudgetPeriod::Day };
    let exceeded =
        BudgetExceeded { budget: day, used: Credits::new(30), cost: Credits::new(30), whose: BudgetOwner::Key };
    assert_eq!(refused, Err(AcceptError::KeyBudgetExceeded(exceeded)));
    assert_eq!(balances(&*store, id).await, (b(970, 30, 0), 1), "nothing held for the refusal");
    accepted(&*store, id, 30).await;

    let settled = step(&*store, &submitted(&*store, &first).await, success(10)).await;
    assert_eq!(settled.credits_actual(), Some(Credits::new(10)));
    assert_eq!(store.key_used(&prefix, since).await.unwrap(), Credits::new(10), "the charge, the rest released");
    let second = match store.accept(keyed_job(id, &prefix, 40), None, None, now()).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("{other:?}"),
    };
    assert_eq!(store.key_used(&prefix, since).await.unwrap(), Credits::new(50), "up to the budget exactly");
    step(&*store, &second, Trigger::Cancel).await;
    assert_eq!(store.key_used(&prefix, since).await.unwrap(), Credits::new(10), "a release gives back");
    assert_eq!(store.key_used(&prefix, Some(now() + Duration::seconds(1))).await.unwrap(), Credits::ZERO);
}

/// A key's concurrency limit counts its own jobs not yet final, beside its user's.
pub async fn a_keys_concurrency_limit_counts_its_own_jobs<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let settings = KeySettings { max_concurrent_jobs: Some(1), ..KeySettings::default() };
    let prefix = key_with(&*store, id, settings).await;
    let running = match store.accept(keyed_job(id, &prefix, 1), None, None, now()).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("{other:?}"),
    };
    let refused = store.accept(keyed_job(id, &prefix, 1), None, None, now()).await;
    assert_eq!(refused, Err(AcceptError::KeyConcurrencyLimit { limit: 1 }));
    accepted(&*store, id, 1).await;
    step(&*store, &running, Trigger::Cancel).await;
    assert!(matches!(store.accept(keyed_job(id, &prefix, 1), None, None, now()).await, Ok(Accepted::Created(_))));
}

/// Concurrent accepts on one key never take its `used` past its budget, and each refusal holds
/// nothing.
pub async fn concurrent_accepts_never_pass_a_keys_budget<S: Store>(store: Arc<S>) {
    let id = user(&*store, 10_000).await;
    let prefix = key_with(&*store, id, budget(50, BudgetPeriod::Total)).await;
    let tasks = (0..24).map(|_| {
        let (store, prefix) = (Arc::clone(&store), prefix.clone());
        tokio::spawn(async move {
            match store.accept(keyed_job(id, &prefix, 7), None, None, now()).await {
                Ok(Accepted::Created(job)) => Some(job),
                Err(AcceptError::KeyBudgetExceeded(_) | AcceptError::ConcurrencyLimit { .. }) => None,
                other => panic!("{other:?}"),
            }
        })
    });
    let created = join_all(tasks).await.into_iter().filter_map(|r| r.expect("task")).count();
    let used = store.key_used(&prefix, None).await.unwrap();
    assert!(used <= Credits::new(50), "used {used} passed the budget");
    assert_eq!(used, Credits::new(7 * u64::try_from(created).unwrap_or(0)));
    assert_eq!(balances(&*store, id).await.0.held, used);
}

/// A key's `used` follows its jobs' credits step by step: raised by an accept, lowered by what a
/// settle or a release gives back; a job of an earlier period gives nothing back to the current
/// one; a change of the budget counts its period's jobs again, and a job not yet final then
/// gives back to the new period when it ends.
pub async fn a_keys_used_follows_its_jobs_across_periods_and_changes<S: Store>(store: Arc<S>) {
    let id = user(&*store, 1000).await;
    let prefix = key_with(&*store, id, budget(100, BudgetPeriod::Day)).await;
    let today = BudgetPeriod::Day.start(now());
    let yesterday = now() - Duration::days(1);
    let accept = async |held, at| match store
        .accept(new_job(id, held, at).with_key_prefix(Some(prefix.clone())), None, None, at)
        .await
    {
        Ok(Accepted::Created(job)) => job,
        other => panic!("expected a created job, got {other:?}"),
    };
    let used = async |since| store.key_used(&prefix, since).await.expect("used");

    let old = accept(25, yesterday).await;
    assert_eq!(used(BudgetPeriod::Day.start(yesterday)).await, Credits::new(25), "yesterday's hold");
    let charged = accept(30, now()).await;
    assert_eq!(used(today).await, Credits::new(30), "a new day counts from nothing");
    step(&*store, &old, Trigger::Cancel).await;
    assert_eq!(used(today).await, Credits::new(30), "yesterday's job gives nothing back to today");
    step(&*store, &submitted(&*store, &charged).await, success(10)).await;
    assert_eq!(used(today).await, Credits::new(10), "a settle keeps the charge, gives back the rest");
    let canceled = accept(20, now()).await;
    assert_eq!(used(today).await, Credits::new(30));
    step(&*store, &canceled, Trigger::Cancel).await;
    assert_eq!(used(today).await, Credits::new(10), "a release gives back the whole hold");

    let pending = accept(15, now()).await;
    assert!(store.set_key_settings(&prefix, budget(60, BudgetPeriod::Total)).await.expect("change"));
    assert_eq!(used(None).await, Credits::new(25), "the whole life counted again: the charge and the hold");
    let refused = store.accept(keyed_job(id, &prefix, 36), None, None, now()).await;
    assert!(matches!(refused, Err(AcceptError::KeyBudgetExceeded(e)) if e.used == Credits::new(25)), "{refused:?}");
    step(&*store, &pending, Trigger::Cancel).await;
    assert_eq!(used(None).await, Credits::new(10), "a job counted again gives back to the new period");
    accept(50, now()).await;
    assert_eq!(used(None).await, Credits::new(60), "up to the changed budget exactly");
}
