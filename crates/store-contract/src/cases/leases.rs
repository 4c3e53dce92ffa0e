//! What the accepting replica's driver needs of a store: a job accepted with a lease is that
//! driver's at once, as if it had claimed it, by either way of accepting.

use std::sync::Arc;

use genjobs_domain::job::JobState;
use genjobs_domain::ports::{Accepted, Limits};
use time::Duration;

use super::{LIMITS, Store, claim, new_job, now, user_with};

/// An accept with a lease keeps the job from every claim until the lease runs out, its lease
/// renews like a claimed one, and a job accepted without one is claimable at once.
pub async fn an_accept_with_a_lease_is_the_accepting_drivers_until_it_runs_out<S: Store>(store: Arc<S>) {
    let id = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let t0 = now();
    let lease = t0 + Duration::seconds(10);
    let mut leased = Vec::new();
    for idempotency in [None, claim("leased", "f1")] {
        match store.accept(new_job(id, 1, t0), idempotency, Some(lease), t0).await {
            Ok(Accepted::Created(job)) => leased.push(job.id()),
            other => panic!("accept: {other:?}"),
        }
    }
    let free = match store.accept(new_job(id, 1, t0), None, None, t0).await {
        Ok(Accepted::Created(job)) => job.id(),
        other => panic!("accept: {other:?}"),
    };
    let t1 = t0 + Duration::seconds(1);
    let claimed: Vec<_> =
        store.claim_due(t1, t1 + Duration::seconds(30), 10).await.unwrap().iter().map(|j| j.id()).collect();
    assert_eq!(claimed, vec![free], "only the job accepted without a lease");

    let renewed = store.renew_leases(leased.clone(), t1, t0 + Duration::seconds(20)).await.unwrap();
    assert_eq!(renewed.len(), 2, "the accept's lease renews: {renewed:?}");
    let t2 = t0 + Duration::seconds(15);
    assert!(store.claim_due(t2, t2 + Duration::seconds(30), 10).await.unwrap().is_empty(), "renewed");
    let t3 = t0 + Duration::seconds(21);
    let taken = store.claim_due(t3, t3 + Duration::seconds(30), 10).await.unwrap();
    assert_eq!(taken.len(), 2, "taken over once the lease runs out");
    assert!(taken.iter().all(|j| leased.contains(&j.id()) && j.state() == JobState::Queued));
}
