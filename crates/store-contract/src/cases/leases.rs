//! What the accepting replica's driver needs of a store: a job accepted with a lease is that
//! driver's at once, as if it had claimed it, by either way of accepting.

use std::sync::Arc;

use genjobs_domain::job::JobState;
use genjobs_domain::ports::{Accepted, Limits};
use time::Duration;

use super::{LIMITS, Store, claim, new_job, now, started_lease, user_with};

/// An accept under a lease keeps the job from every other driver's claim while the lease lives,
/// the job stays under it when it is renewed, and a job accepted without one is claimable at
/// once.
pub async fn an_accept_with_a_lease_is_the_accepting_drivers_until_it_runs_out<S: Store>(store: Arc<S>) {
    let id = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let t0 = now();
    let holder = started_lease(&*store, t0, t0 + Duration::seconds(10)).await;
    let mut leased = Vec::new();
    for idempotency in [None, claim("leased", "f1")] {
        match store.accept(new_job(id, 1, t0), idempotency, Some(holder), t0).await {
            Ok(Accepted::Created(job)) => leased.push(job.id()),
            other => panic!("accept: {other:?}"),
        }
    }
    let free = match store.accept(new_job(id, 1, t0), None, None, t0).await {
        Ok(Accepted::Created(job)) => job.id(),
        other => panic!("accept: {other:?}"),
    };
    let other = started_lease(&*store, t0, t0 + Duration::minutes(5)).await;
    let t1 = t0 + Duration::seconds(1);
    let claimed: Vec<_> = store.claim_due(other, t1, 10).await.unwrap().iter().map(|j| j.id()).collect();
    assert_eq!(claimed, vec![free], "only the job accepted without a lease");

    let renewal = store.renew_lease(holder, leased.clone(), t1, t1, t0 + Duration::seconds(20)).await.unwrap();
    assert_eq!(renewal, Some(Vec::new()), "the accept's lease renews and covers both jobs");
    let t2 = t0 + Duration::seconds(15);
    assert!(store.claim_due(other, t2, 10).await.unwrap().is_empty(), "renewed");
    let t3 = t0 + Duration::seconds(21);
    let taken = store.claim_due(other, t3, 10).await.unwrap();
    assert_eq!(taken.len(), 2, "taken over once the lease runs out");
    assert!(taken.iter().all(|j| leased.contains(&j.id()) && j.state() == JobState::Queued));
}
