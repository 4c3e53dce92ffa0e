//! Model-based test of the stores: random sequences of operations (grants, accepts with and
//! without idempotency keys, settles, failures, cancels, reads) run against the in-memory store,
//! the Postgres store and a small reference model written here; all three must give the same
//! answer to every operation and end with the same balances.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::collections::HashMap;
use std::sync::Arc;

use genjobs_domain::credits::{Balances, Credits};
use genjobs_domain::ids::{ApiKey, UserId};
use genjobs_domain::job::{Job, JobError, JobErrorCode, Trigger, UpstreamRef};
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use genjobs_domain::ports::{
    AcceptError, Accepted, AccountError, AccountStore, Commit, IdempotencyClaim, JobStore, Limits, StoredKey,
};
use genjobs_store_contract::cases::new_job;
use genjobs_store_memory::MemoryStore;
use genjobs_store_postgres::connect;
use genjobs_test_postgres::TestDatabase;
use proptest::prelude::*;
use time::OffsetDateTime;

const MAX_CONCURRENT: u32 = 3;

#[derive(Debug, Clone)]
enum Op {
    Grant(i64),
    Accept { held: u64, key: Option<(u8, u8)> },
    Succeed { job: usize, actual: u64 },
    Fail { job: usize },
    Cancel { job: usize },
    Read,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (-60i64..120).prop_map(Op::Grant),
        4 => (0u64..40, prop::option::of((0u8..3, 0u8..2))).prop_map(|(held, key)| Op::Accept { held, key }),
        2 => (0usize..8, 0u64..50).prop_map(|(job, actual)| Op::Succeed { job, actual }),
        1 => (0usize..8).prop_map(|job| Op::Fail { job }),
        1 => (0usize..8).prop_map(|job| Op::Cancel { job }),
        1 => Just(Op::Read),
    ]
}

/// The reference: balances, jobs (held, final) and idempotency keys, by the contract's rules.
#[derive(Default)]
struct Model {
    balances: Balances,
    active: u32,
    jobs: Vec<(u64, bool)>,
    keys: HashMap<u8, (u8, usize)>,
}

impl Model {
    fn apply(&mut self, op: &Op) -> String {
        match *op {
            Op::Grant(amount) => match self.balances.grant(amount) {
                Ok(b) => {
                    self.balances = b;
                    format!("granted {:?}", b)
                }
                Err(_) => "grant refused".into(),
            },
            Op::Accept { held, key } => {
                if let Some((key, fingerprint)) = key
                    && let Some(&(first, job)) = self.keys.get(&key)
                {
                    return if first == fingerprint { format!("replayed {job}") } else { "conflict".into() };
                }
                if self.balances.available < Credits::new(held) {
                    return "insufficient".into();
                }
                if self.active >= MAX_CONCURRENT {
                    return "concurrency".into();
                }
                self.balances.available = Credits::new(self.balances.available.get() - held);
                self.balances.held = Credits::new(self.balances.held.get() + held);
                self.active += 1;
                self.jobs.push((held, false));
                if let Some((key, fingerprint)) = key {
                    self.keys.insert(key, (fingerprint, self.jobs.len() - 1));
                }
                format!("created {}", self.jobs.len() - 1)
            }
            Op::Succeed { job, actual } => self.finish(job, Some(actual)),
            Op::Fail { job } | Op::Cancel { job } => self.finish(job, None),
            Op::Read => format!("{:?} active {}", self.balances, self.active),
        }
    }

    fn finish(&mut self, job: usize, charged: Option<u64>) -> String {
        let Some((held, done)) = self.jobs.get_mut(job) else { return "no job".into() };
        if *done {
            return "already final".into();
        }
        *done = true;
        let spent = charged.map_or(0, |c| c.min(*held));
        self.balances.held = Credits::new(self.balances.held.get() - *held);
        self.balances.spent = Credits::new(self.balances.spent.get() + spent);
        self.balances.available = Credits::new(self.balances.available.get() + *held - spent);
        self.active -= 1;
        "committed".into()
    }
}

/// One store under test, with the jobs it accepted in order.
struct Subject<S> {
    store: Arc<S>,
    user: UserId,
    jobs: Vec<Job>,
}

impl<S: JobStore + AccountStore> Subject<S> {
    async fn new(store: Arc<S>) -> Self {
        let now = OffsetDateTime::now_utc();
        let user = UserId::new_at(now);
        let key = ApiKey::generate();
        let limits = Limits { rate_limit_per_minute: 1000, max_concurrent_jobs: MAX_CONCURRENT };
        store.create_user(user, "m".into(), Credits::ZERO, limits, StoredKey::of(&key, user, now)).await.unwrap();
        Self { store, user, jobs: Vec::new() }
    }

    async fn apply(&mut self, op: &Op) -> String {
        let now = OffsetDateTime::now_utc();
        match *op {
            Op::Grant(amount) => match self.store.grant(self.user, amount).await {
                Ok(account) => format!("granted {:?}", account.balances),
                Err(AccountError::GrantBelowZero { .. } | AccountError::GrantTooLarge { .. }) => "grant refused".into(),
                Err(e) => panic!("grant: {e}"),
            },
            Op::Accept { held, key } => {
                let claim = key.map(|(k, f)| IdempotencyClaim { key: format!("k{k}"), fingerprint: format!("f{f}") });
                match self.store.accept(new_job(self.user, held, now), claim, None, now).await {
                    Ok(Accepted::Created(job)) => {
                        self.jobs.push(job);
                        format!("created {}", self.jobs.len() - 1)
                    }
                    Ok(Accepted::Replayed(job)) => {
                        format!("replayed {}", self.jobs.iter().position(|j| j.id() == job.id()).unwrap())
                    }
                    Err(AcceptError::InsufficientCredits { .. }) => "insufficient".into(),
                    Err(AcceptError::ConcurrencyLimit { .. }) => "concurrency".into(),
                    Err(AcceptError::IdempotencyConflict) => "conflict".into(),
                    Err(e) => panic!("accept: {e}"),
                }
            }
            Op::Succeed { job, actual } => {
                let output = OutputItem {
                    url: "https://cdn/x.png".into(),
                    kind: OutputKind::Image,
                    meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
                    copy: None,
                };
                let steps = [
                    Trigger::SubmitStarted { next_poll_at: now },
                    Trigger::Submitted { upstream: UpstreamRef::new("test", "r"), next_poll_at: now, billing: None },
                    Trigger::Succeeded {
                        outputs: vec![output],
                        credits_actual: Credits::new(actual),
                        reported_units: None,
                    },
                ];
                self.finish(job, steps.to_vec()).await
            }
            Op::Fail { job } => {
                let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
                self.finish(job, vec![Trigger::failed(error)]).await
            }
            Op::Cancel { job } => self.finish(job, vec![Trigger::Cancel]).await,
            Op::Read => {
                let account = self.store.account(self.user).await.unwrap().unwrap();
                format!("{:?} active {}", account.balances, account.active_jobs)
            }
        }
    }

    async fn finish(&mut self, index: usize, steps: Vec<Trigger>) -> String {
        let Some(stored) = self.jobs.get(index) else { return "no job".into() };
        let mut job = self.store.job(stored.id()).await.unwrap().unwrap();
        if job.state().is_final() {
            return "already final".into();
        }
        for step in steps {
            let transition = job.apply(step, OffsetDateTime::now_utc()).unwrap();
            match self.store.commit(transition).await.unwrap() {
                Commit::Applied(next) => job = next,
                other => panic!("commit: {other:?}"),
            }
        }
        "committed".into()
    }
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let db = TestDatabase::new().await;
        let postgres = connect(&db.settings()).unwrap();
        let mut on_postgres = Subject::new(Arc::clone(&postgres.store)).await;
        let mut in_memory = Subject::new(Arc::new(MemoryStore::new())).await;
        let mut model = Model::default();
        for (step, op) in ops.iter().enumerate() {
            let expected = model.apply(op);
            prop_assert_eq!(&in_memory.apply(op).await, &expected, "in-memory, step {} {:?}", step, op);
            prop_assert_eq!(&on_postgres.apply(op).await, &expected, "Postgres, step {} {:?}", step, op);
        }
        let read = model.apply(&Op::Read);
        prop_assert_eq!(in_memory.apply(&Op::Read).await, read.clone());
        prop_assert_eq!(on_postgres.apply(&Op::Read).await, read);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_stores_and_the_reference_model_agree(ops in prop::collection::vec(op(), 1..30)) {
        run(&ops)?;
    }
}
