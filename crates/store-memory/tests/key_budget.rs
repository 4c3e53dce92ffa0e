//! A property of key budgets on this store: whatever sequence of accepts, charges and releases a
//! key's jobs go through, its `used` never passes its budget and always equals what its jobs hold
//! (not yet final) or were charged (succeeded), counted here from the steps themselves.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

use std::sync::Arc;

use genjobs_domain::credits::Credits;
use genjobs_domain::job::{Job, JobError, JobErrorCode, Trigger};
use genjobs_domain::keys::{BudgetPeriod, KeyBudget};
use genjobs_domain::ports::{AcceptError, Accepted, AccountStore, JobStore};
use genjobs_store_contract::cases::{budget, key_with, keyed_job, now, step, submitted, success, user};
use genjobs_store_memory::MemoryStore;
use proptest::prelude::*;

/// One step of the sequence: accept a job holding this much, or end the `n`-th job still open
/// (charging part of its hold, or releasing all of it).
#[derive(Debug, Clone)]
enum Step {
    Accept(u64),
    Charge { job: usize, percent: u64 },
    Release { job: usize },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        3 => (1_u64..=30).prop_map(Step::Accept),
        1 => (any::<usize>(), 0_u64..=100).prop_map(|(job, percent)| Step::Charge { job, percent }),
        1 => any::<usize>().prop_map(|job| Step::Release { job }),
    ];
    proptest::collection::vec(step, 1..40)
}

async fn run(budget_credits: u64, steps: Vec<Step>) {
    let store = Arc::new(MemoryStore::new());
    let id = user(&*store, 1_000_000).await;
    let prefix = key_with(&*store, id, budget(budget_credits, BudgetPeriod::Total)).await;
    let mut open: Vec<Job> = Vec::new();
    let mut expected = 0_u64;
    for step_now in steps {
        match step_now {
            Step::Accept(cost) => match store.accept(keyed_job(id, &prefix, cost), None, None, now()).await {
                Ok(Accepted::Created(job)) => {
                    assert!(expected + cost <= budget_credits, "accepted past the budget");
                    expected += cost;
                    open.push(job);
                }
                Err(AcceptError::KeyBudgetExceeded(exceeded)) => {
                    assert!(expected + cost > budget_credits, "refused within the budget");
                    let budget = KeyBudget { credits: Credits::new(budget_credits), period: BudgetPeriod::Total };
                    assert_eq!(
                        (exceeded.budget, exceeded.used, exceeded.cost),
                        (budget, Credits::new(expected), Credits::new(cost))
                    );
                }
                Err(AcceptError::ConcurrencyLimit { .. }) => {}
                other => panic!("{other:?}"),
            },
            Step::Charge { job, percent } if !open.is_empty() => {
                let job = open.remove(job % open.len());
                let held = job.credits_held().get();
                let charged = held * percent / 100;
                step(&*store, &submitted(&*store, &job).await, success(charged)).await;
                expected -= held - charged;
            }
            Step::Release { job } if !open.is_empty() => {
                let job = open.remove(job % open.len());
                let error = JobError::new(JobErrorCode::UpstreamFailed, "x");
                step(&*store, &job, Trigger::failed(error)).await;
                expected -= job.credits_held().get();
            }
            Step::Charge { .. } | Step::Release { .. } => {}
        }
        let used = store.key_used(&prefix, None).await.unwrap();
        assert_eq!(used, Credits::new(expected));
        assert!(used.get() <= budget_credits);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_keys_used_never_passes_its_budget_and_counts_holds_and_charges(budget in 0_u64..120, steps in steps()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(run(budget, steps));
    }
}
