//! The contract cases. Each takes a fresh, empty store.

mod accounts;
mod admin_jobs;
mod batch_webhooks;
mod batches;
mod catalog;
mod kept;
mod key_tree;
mod keys;
mod leases;
mod ledger;
mod openai_batches;
mod outbox;
mod provider;
mod provider_cost;
mod removals;
mod retention;
mod routing;
mod sealing;
mod slots;
mod uploads;

pub use accounts::*;
pub use admin_jobs::*;
pub use batch_webhooks::*;
pub use batches::*;
pub use catalog::*;
pub use kept::*;
pub use key_tree::*;
pub use keys::*;
pub use leases::*;
pub use ledger::ledgers_match_accounts;
pub use openai_batches::*;
pub use outbox::*;
pub use provider::*;
pub use provider_cost::*;
pub use removals::*;
pub use retention::*;
pub use routing::*;
pub use sealing::*;
pub use slots::*;
pub use uploads::*;

use std::sync::Arc;

use futures_util::future::join_all;
use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use genjobs_domain::credits::{Balances, Credits};
use genjobs_domain::ids::{ApiKey, JobId, LeaseId, ModelId, UserId};
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::{Job, JobError, JobErrorCode, JobState, Trigger, UpstreamRef};
use genjobs_domain::modality::Modality;
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use genjobs_domain::ports::{
    AcceptError, Accepted, AccountStore, BatchStore, CatalogStore, Commit, IdempotencyClaim, JobRemovals, JobStore,
    KeptSecrets, Limits, OpenAiBatchStore, ProviderSlots, StoredKey, UnfinishedJobs, UploadStore, UsageStore,
    WebhookStore,
};
use time::{Duration, OffsetDateTime};

/// What every case needs of a store.
pub trait Store:
    JobStore
    + BatchStore
    + AccountStore
    + UsageStore
    + WebhookStore
    + CatalogStore
    + KeptSecrets
    + JobRemovals
    + ProviderSlots
    + UploadStore
    + OpenAiBatchStore
    + 'static
{
}
impl<
    T: JobStore
        + BatchStore
        + AccountStore
        + UsageStore
        + WebhookStore
        + CatalogStore
        + KeptSecrets
        + JobRemovals
        + ProviderSlots
        + UploadStore
        + OpenAiBatchStore
        + 'static,
> Store for T
{
}

/// Now, in whole microseconds.
pub fn now() -> OffsetDateTime {
    // Whole microseconds, so that stores with microsecond timestamps (Postgres) compare equal.
    let t = OffsetDateTime::now_utc();
    t.replace_nanosecond(t.nanosecond() / 1000 * 1000).unwrap_or(t)
}

const LIMITS: Limits = Limits { rate_limit_per_minute: 120, max_concurrent_jobs: 3 };

/// A new user of `store` with `credits` and the suite's limits.
pub async fn user<S: Store>(store: &S, credits: u64) -> UserId {
    user_with(store, credits, LIMITS).await
}

async fn user_with<S: Store>(store: &S, credits: u64, limits: Limits) -> UserId {
    let id = UserId::new_at(now());
    let key = StoredKey::of(&ApiKey::generate(), id, now());
    store.create_user(id, "tester".into(), Credits::new(credits), limits, key).await.expect("create user");
    ledger::remember(store, id);
    id
}

/// A small image request, with an `extra` object to check that it round-trips.
pub fn input() -> GenerationInput {
    GenerationInput {
        prompt: "a lighthouse".into(),
        negative_prompt: None,
        aspect_ratio: "1:1".into(),
        resolution: None,
        duration_sec: None,
        n: Some(1),
        seed: None,
        image_inputs: vec![],
        extra: Some(serde_json::json!({"k": [1, 2]}).as_object().cloned().unwrap_or_default()),
    }
}

/// A job of `user_id` holding `held` (one image at that rate), accepted at `at`.
pub fn new_job(user_id: UserId, held: u64, at: OffsetDateTime) -> Job {
    Job::accept(
        JobId::new_at(at),
        user_id,
        ModelId::new("nano-banana"),
        Modality::Image,
        input(),
        Rate { per: Unit::Image, credits: held, percent: PricePercent::FULL, batch_percent: PricePercent::FULL },
        at,
    )
    .0
}

/// A job of `user_id` holding `held`, accepted by `store` now.
pub async fn accepted<S: Store>(store: &S, user_id: UserId, held: u64) -> Job {
    match store.accept(new_job(user_id, held, now()), None, None, now()).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("expected a created job, got {other:?}"),
    }
}

pub(crate) async fn balances<S: Store>(store: &S, user_id: UserId) -> (Balances, u32) {
    let account = store.account(user_id).await.expect("account").expect("user exists");
    (account.balances, account.active_jobs)
}

pub(crate) fn b(available: u64, held: u64, spent: u64) -> Balances {
    Balances { available: Credits::new(available), held: Credits::new(held), spent: Credits::new(spent) }
}

fn upstream() -> UpstreamRef {
    UpstreamRef::new("test", "req-1")
}

/// `job` after `trigger`, committed to `store`.
pub async fn step<S: Store>(store: &S, job: &Job, trigger: Trigger) -> Job {
    match store.commit(job.apply(trigger, now()).expect("transition")).await.expect("commit") {
        Commit::Applied(job) => job,
        other => panic!("expected the commit to apply, got {other:?}"),
    }
}

/// `job` submitted to the provider, committed to `store`.
pub async fn submitted<S: Store>(store: &S, job: &Job) -> Job {
    let job = step(store, job, Trigger::SubmitStarted { next_poll_at: now() }).await;
    step(store, &job, Trigger::Submitted { upstream: upstream(), next_poll_at: now(), billing: None }).await
}

/// The provider's success, delivering one image charged `actual`.
pub fn success(actual: u64) -> Trigger {
    Trigger::Succeeded {
        outputs: vec![OutputItem {
            url: "https://cdn/x.png".into(),
            kind: OutputKind::Image,
            meta: OutputMeta { content_type: "image/png".into(), width: Some(8), ..OutputMeta::default() },
            copy: None,
        }],
        credits_actual: Credits::new(actual),
        reported_units: None,
    }
}

/// Accepting holds the job's credits, stores the job as given and counts it as active.
pub async fn accept_holds_credits_and_counts_the_job<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let job = accepted(&*store, id, 30).await;
    assert_eq!(balances(&*store, id).await, (b(70, 30, 0), 1));
    let stored = store.job(job.id()).await.unwrap().expect("stored");
    assert_eq!(stored, job);
    assert_eq!(stored.input().extra, input().extra);
}

/// A user short of credits and at the limit gets 402, not 429: credits are checked first.
pub async fn accept_checks_credits_before_concurrency<S: Store>(store: Arc<S>) {
    let id = user_with(&*store, 10, Limits { max_concurrent_jobs: 1, ..LIMITS }).await;
    accepted(&*store, id, 10).await;
    let refused = store.accept(new_job(id, 5, now()), None, None, now()).await;
    assert_eq!(refused, Err(AcceptError::InsufficientCredits { needed: Credits::new(5), available: Credits::ZERO }));
}

/// A user with as many jobs running as the limit cannot start another; nothing is held.
pub async fn accept_refuses_beyond_the_concurrency_limit<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    for _ in 0..LIMITS.max_concurrent_jobs {
        accepted(&*store, id, 1).await;
    }
    let refused = store.accept(new_job(id, 1, now()), None, None, now()).await;
    assert_eq!(refused, Err(AcceptError::ConcurrencyLimit { limit: 3 }));
    assert_eq!(balances(&*store, id).await, (b(97, 3, 0), 3));
}

/// A job for a user that does not exist is refused.
pub async fn accept_refuses_an_unknown_user<S: Store>(store: Arc<S>) {
    let ghost = UserId::new_at(now());
    assert_eq!(store.accept(new_job(ghost, 1, now()), None, None, now()).await, Err(AcceptError::UnknownUser));
}

fn claim(key: &str, fingerprint: &str) -> Option<IdempotencyClaim> {
    Some(IdempotencyClaim { key: key.into(), fingerprint: fingerprint.into() })
}

/// The same key and body gives back the first job and holds nothing more.
pub async fn idempotent_retry_replays_without_holding<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let first = match store.accept(new_job(id, 10, now()), claim("k1", "f1"), None, now()).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("{other:?}"),
    };
    let retry = store.accept(new_job(id, 10, now()), claim("k1", "f1"), None, now()).await;
    assert_eq!(retry, Ok(Accepted::Replayed(first)));
    assert_eq!(balances(&*store, id).await, (b(90, 10, 0), 1));
}

/// The same key with another body is a conflict and holds nothing.
pub async fn idempotency_key_with_another_body_conflicts<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    store.accept(new_job(id, 10, now()), claim("k1", "f1"), None, now()).await.expect("first");
    let conflict = store.accept(new_job(id, 10, now()), claim("k1", "f2"), None, now()).await;
    assert_eq!(conflict, Err(AcceptError::IdempotencyConflict));
    assert_eq!(balances(&*store, id).await, (b(90, 10, 0), 1));
}

/// Two users may use the same key for different jobs.
pub async fn idempotency_keys_are_per_user<S: Store>(store: Arc<S>) {
    let (a, b_) = (user(&*store, 100).await, user(&*store, 100).await);
    store.accept(new_job(a, 10, now()), claim("shared", "f1"), None, now()).await.expect("a");
    let other = store.accept(new_job(b_, 10, now()), claim("shared", "f2"), None, now()).await;
    assert!(matches!(other, Ok(Accepted::Created(_))), "{other:?}");
}

/// A transition made from an old version does not apply and moves no credits.
pub async fn commit_applies_only_on_the_expected_version<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let job = submitted(&*store, &accepted(&*store, id, 20).await).await;
    let cancel = job.apply(Trigger::Cancel, now()).unwrap();
    let late_success = job.apply(success(20), now()).unwrap();
    assert!(matches!(store.commit(cancel).await.unwrap(), Commit::Applied(_)));
    match store.commit(late_success).await.unwrap() {
        Commit::Stale(current) => assert_eq!(current.state(), JobState::Canceled),
        other => panic!("a late result after a cancel must not apply: {other:?}"),
    }
    assert_eq!(balances(&*store, id).await, (b(100, 0, 0), 0));
}

/// Success charges the actual amount, releases the rest, and frees a concurrency slot.
pub async fn success_settles_and_frees_a_slot<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let job = submitted(&*store, &accepted(&*store, id, 20).await).await;
    let running = step(&*store, &job, Trigger::UpstreamRunning { progress: 40, next_poll_at: now() }).await;
    assert_eq!(store.job(job.id()).await.unwrap().unwrap().progress(), 40);
    let done = step(&*store, &running, success(15)).await;
    assert_eq!(done.state(), JobState::Succeeded);
    assert_eq!(store.job(job.id()).await.unwrap(), Some(done));
    assert_eq!(balances(&*store, id).await, (b(85, 0, 15), 0));
}

/// Failure and cancel release everything held.
pub async fn failure_and_cancel_release_everything<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let failing = accepted(&*store, id, 20).await;
    let canceling = accepted(&*store, id, 30).await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
    let failed = step(&*store, &failing, Trigger::failed(error)).await;
    let canceled = step(&*store, &canceling, Trigger::Cancel).await;
    assert_eq!(failed.error().as_ref().map(|e| e.code), Some(JobErrorCode::UpstreamFailed));
    assert_eq!(canceled.canceled_at(), canceled.finished_at());
    assert_eq!(balances(&*store, id).await, (b(100, 0, 0), 0));
}

/// Committing a transition of a job the store never had says `Missing`.
pub async fn commit_of_a_missing_job_says_so<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let phantom = new_job(id, 1, now());
    let transition = phantom.apply(Trigger::Cancel, now()).unwrap();
    assert_eq!(store.commit(transition).await.unwrap(), Commit::Missing);
}

/// A new driver's lease, started at `at` and living until `until`.
pub async fn started_lease<S: Store + ?Sized>(store: &S, at: OffsetDateTime, until: OffsetDateTime) -> LeaseId {
    let lease = LeaseId::new_at(at);
    store.start_lease(lease, at, until).await.expect("start a lease");
    lease
}

/// A due job is claimed once; another driver gets it only after the lease it is under ran out,
/// and a commit by the driver holding it keeps it under the lease.
pub async fn claim_returns_due_jobs_once_until_the_lease_ends<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let job = accepted(&*store, id, 1).await;
    let t0 = now() + Duration::milliseconds(1);
    let until = t0 + Duration::seconds(30);
    let holder = started_lease(&*store, t0, until).await;
    let other = started_lease(&*store, t0, until + Duration::hours(1)).await;
    let first = store.claim_due(holder, t0, 10).await.unwrap();
    assert_eq!(first.iter().map(|j| j.id()).collect::<Vec<_>>(), vec![job.id()]);
    assert!(store.claim_due(other, t0, 10).await.unwrap().is_empty(), "a job under a live lease is not claimed twice");

    let attempted = step(&*store, &first[0], Trigger::SubmitStarted { next_poll_at: now() }).await;
    let soon = now() + Duration::seconds(1);
    step(&*store, &attempted, Trigger::SubmitNotReached { next_poll_at: soon }).await;
    let later = soon + Duration::seconds(5);
    assert!(store.claim_due(other, later, 10).await.unwrap().is_empty(), "the commit kept the job under its lease");

    let after_lease = until + Duration::seconds(1);
    let again = store.claim_due(other, after_lease, 10).await.unwrap();
    assert_eq!(again.len(), 1, "a lease that ran out makes the job claimable again");
    assert!(!again[0].submit_attempted(), "with what was committed meanwhile");
}

/// A lease lives while it is renewed, whatever it holds. A renewal frees the open jobs under it
/// that its driver no longer holds (let go after a failed commit), but none accepted after its
/// cutoff, and names the held jobs it does not cover (final). A lease that ran out never lives again and claims nothing, and its
/// open jobs are another driver's to claim.
pub async fn a_renewed_lease_keeps_its_jobs_and_one_that_ran_out_never_lives_again<S: Store>(store: Arc<S>) {
    let id = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let (open, finished, dropped) =
        (accepted(&*store, id, 1).await, accepted(&*store, id, 1).await, accepted(&*store, id, 1).await);
    let t0 = now() + Duration::milliseconds(1);
    let holder = started_lease(&*store, t0, t0 + Duration::seconds(10)).await;
    let claimed = store.claim_due(holder, t0, 10).await.unwrap();
    assert_eq!(claimed.len(), 3);
    let held = |id: JobId| claimed.iter().find(|j| j.id() == id).cloned().unwrap();
    step(&*store, &held(finished.id()), Trigger::Cancel).await;
    // Accepted under the lease after the renewal's cutoff: maybe still on its way to the driver.
    let handed = match store.accept(new_job(id, 1, t0 + Duration::seconds(2)), None, Some(holder), t0).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("accept: {other:?}"),
    };

    let renewal = store.renew_lease(
        holder,
        vec![open.id(), finished.id()],
        t0 + Duration::seconds(1),
        t0 + Duration::seconds(5),
        t0 + Duration::seconds(20),
    );
    assert_eq!(renewal.await.unwrap(), Some(vec![finished.id()]), "the final job is not held any more");
    let other = started_lease(&*store, t0, t0 + Duration::minutes(5)).await;
    let renewed = t0 + Duration::seconds(15);
    let freed = store.claim_due(other, renewed, 10).await.unwrap();
    assert_eq!(freed.iter().map(|j| j.id()).collect::<Vec<_>>(), vec![dropped.id()], "only the job let go of");
    let next = store.renew_lease(holder, vec![open.id(), handed.id()], t0, renewed, t0 + Duration::seconds(20));
    assert_eq!(next.await.unwrap(), Some(Vec::new()), "the job handed over is still the holder's");

    let late = t0 + Duration::seconds(21);
    let ran_out = store.renew_lease(holder, vec![open.id(), handed.id()], late, late, late + Duration::seconds(60));
    assert_eq!(ran_out.await.unwrap(), None);
    assert!(store.claim_due(holder, late, 10).await.unwrap().is_empty(), "a lease that ran out claims nothing");
    let mut taken: Vec<_> = store.claim_due(other, late, 10).await.unwrap().iter().map(|j| j.id()).collect();
    taken.sort();
    assert_eq!(taken, vec![open.id(), handed.id()], "taken over once it ran out");
    let never = LeaseId::new_at(t0);
    assert_eq!(store.renew_lease(never, Vec::new(), t0, t0, t0 + Duration::seconds(60)).await.unwrap(), None);
    assert!(store.claim_due(never, t0, 10).await.unwrap().is_empty(), "a lease never started claims nothing");
}

/// A driver that stops ends its lease: every open job under it is claimable at once by another
/// driver, and the ended lease never lives again.
pub async fn an_ended_lease_makes_its_jobs_claimable_at_once<S: Store>(store: Arc<S>) {
    let id = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let (open, finished) = (accepted(&*store, id, 1).await, accepted(&*store, id, 1).await);
    let t0 = now() + Duration::milliseconds(1);
    let holder = started_lease(&*store, t0, t0 + Duration::seconds(30)).await;
    let claimed = store.claim_due(holder, t0, 10).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let held = |id: JobId| claimed.iter().find(|j| j.id() == id).cloned().unwrap();
    step(&*store, &held(finished.id()), Trigger::Cancel).await;
    let other = started_lease(&*store, t0, t0 + Duration::seconds(30)).await;
    assert!(store.claim_due(other, t0, 10).await.unwrap().is_empty());

    store.end_lease(holder).await.unwrap();
    let taken = store.claim_due(other, t0, 10).await.unwrap();
    assert_eq!(taken.iter().map(|j| j.id()).collect::<Vec<_>>(), vec![open.id()], "claimable without waiting");
    let ended = store.renew_lease(holder, vec![open.id()], t0, t0, t0 + Duration::seconds(30)).await.unwrap();
    assert_eq!(ended, None, "ended for good");
}

/// Open jobs are counted by state; final ones are not counted.
pub async fn unfinished_jobs_are_counted_by_state<S: Store>(store: Arc<S>) {
    assert_eq!(store.count_unfinished().await.unwrap(), UnfinishedJobs::default());
    let id = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let jobs = [accepted(&*store, id, 1).await, accepted(&*store, id, 1).await, accepted(&*store, id, 1).await];
    let submitted = submitted(&*store, &jobs[0]).await;
    step(&*store, &submitted, Trigger::UpstreamRunning { progress: 10, next_poll_at: now() }).await;
    step(&*store, &jobs[1], Trigger::Cancel).await;
    assert_eq!(store.count_unfinished().await.unwrap(), UnfinishedJobs { queued: 1, running: 1 });
}

/// Final jobs and jobs due later are not claimed; `limit` bounds a claim.
pub async fn claim_skips_final_and_future_jobs<S: Store>(store: Arc<S>) {
    let id = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let canceled = accepted(&*store, id, 1).await;
    step(&*store, &canceled, Trigger::Cancel).await;
    for _ in 0..3 {
        accepted(&*store, id, 1).await;
    }
    let later = now() + Duration::hours(1);
    store.accept(new_job(id, 1, later), None, None, now()).await.expect("future job");
    let t = now() + Duration::milliseconds(1);
    let lease = started_lease(&*store, t, t + Duration::seconds(30)).await;
    let claimed = store.claim_due(lease, t, 2).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let rest = store.claim_due(lease, t, 10).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert!(claimed.iter().chain(&rest).all(|j| j.state() == JobState::Queued && j.id() != canceled.id()));
}

/// A user's jobs come newest first, paged by `before`, and never another user's.
pub async fn jobs_are_listed_newest_first_in_pages<S: Store>(store: Arc<S>) {
    let id = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let other = user(&*store, 100).await;
    accepted(&*store, other, 1).await;
    let base = now();
    let mut ids = Vec::new();
    for i in 0..5 {
        let job = new_job(id, 1, base + Duration::milliseconds(i));
        ids.push(job.id());
        store.accept(job, None, None, now()).await.expect("accept");
    }
    ids.reverse();
    let page1: Vec<_> = store.jobs_of(id, None, 3).await.unwrap().iter().map(|j| j.id()).collect();
    assert_eq!(page1, ids[..3]);
    let page2: Vec<_> = store.jobs_of(id, Some(ids[2]), 3).await.unwrap().iter().map(|j| j.id()).collect();
    assert_eq!(page2, ids[3..]);
}

/// Accepts of many users at once (each user's several at a time, an unknown user's among them)
/// each hold their own user's credits: every user gets exactly the jobs its credits pay for, the
/// others are refused for credits with nothing held, the ledger has one hold per job, and the
/// unknown user is refused as unknown.
pub async fn concurrent_accepts_of_many_users_hold_each_users_own_credits<S: Store>(store: Arc<S>) {
    let limits = Limits { max_concurrent_jobs: 100, ..LIMITS };
    let mut users = Vec::new();
    for _ in 0..8 {
        users.push(user_with(&*store, 35, limits).await);
    }
    let ghost = UserId::new_at(now());
    let tasks = users.iter().chain([&ghost]).flat_map(|&id| (0..9).map(move |_| id)).map(|id| {
        let store = Arc::clone(&store);
        tokio::spawn(async move { (id, store.accept(new_job(id, 7, now()), None, None, now()).await) })
    });
    let outcomes: Vec<_> = join_all(tasks).await.into_iter().map(|r| r.expect("task")).collect();
    for (id, outcome) in &outcomes {
        match outcome {
            Ok(Accepted::Created(job)) => assert_eq!(job.user_id(), *id),
            Err(AcceptError::InsufficientCredits { needed, .. }) => assert_eq!(*needed, Credits::new(7)),
            Err(AcceptError::UnknownUser) => assert_eq!(*id, ghost),
            other => panic!("{other:?}"),
        }
    }
    for id in users {
        let created = outcomes.iter().filter(|(of, o)| *of == id && matches!(o, Ok(Accepted::Created(_)))).count();
        assert_eq!(created, 5, "35 credits pay for five jobs of 7");
        assert_eq!(balances(&*store, id).await, (b(0, 35, 0), 5));
        let holds = store.ledger(id, None, None, 100).await.unwrap().into_iter().filter(|e| e.job_id.is_some()).count();
        assert_eq!(holds, 5, "one hold per accepted job");
    }
}

/// Many tasks accepting, canceling and finishing jobs for one user at once never exceed the
/// concurrency limit or the credits, every job moves its credits once, and
/// available + held + spent equals the grant at the end.
pub async fn concurrent_accepts_and_finishes_keep_every_invariant<S: Store>(store: Arc<S>) {
    let limits = Limits { max_concurrent_jobs: 4, ..LIMITS };
    let id = user_with(&*store, 200, limits).await;
    let tasks = (0..64).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let job = match store.accept(new_job(id, 7, now()), None, None, now()).await {
                Ok(Accepted::Created(job)) => job,
                Ok(other) => panic!("{other:?}"),
                Err(AcceptError::ConcurrencyLimit { .. } | AcceptError::InsufficientCredits { .. }) => return 0,
                Err(e) => panic!("{e}"),
            };
            let account = store.account(id).await.unwrap().unwrap();
            assert!(account.active_jobs <= limits.max_concurrent_jobs, "limit exceeded: {}", account.active_jobs);
            let trigger = if i % 2 == 0 {
                Trigger::Cancel
            } else {
                Trigger::failed(JobError::new(JobErrorCode::UpstreamFailed, "x"))
            };
            let racing = [job.apply(trigger, now()).unwrap(), job.apply(Trigger::Cancel, now()).unwrap()];
            let outcomes = join_all(racing.into_iter().map(|t| store.commit(t))).await;
            outcomes.iter().filter(|o| matches!(o, Ok(Commit::Applied(_)))).count()
        })
    });
    let applied: usize = join_all(tasks).await.into_iter().map(|r| r.expect("task")).sum();
    let accepted_jobs = store.jobs_of(id, None, 1000).await.unwrap();
    assert_eq!(applied, accepted_jobs.len(), "exactly one final transition per job");
    assert!(accepted_jobs.iter().all(|j| j.state().is_final()));
    let (balances, active) = balances(&*store, id).await;
    assert_eq!(active, 0);
    assert_eq!(balances, b(200, 0, 0));
    assert_eq!(balances.total(), 200);
}
