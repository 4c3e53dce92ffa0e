//! One rate limit shared by every replica.

use super::*;

/// A user and two rate limiters on one database, as two replicas have.
async fn two_limiters(db: &TestDatabase) -> (UserId, [PgRateLimiter; 2]) {
    let (id, _) = user(&replica(db).store, 1, 1).await;
    let settings = db.settings();
    let limiter = || PgRateLimiter::new(pool(&settings).unwrap()).with_pooler(settings.pooler);
    (id, [limiter(), limiter()])
}

#[tokio::test]
async fn two_replicas_share_one_rate_limit() {
    let db = crate::database().await;
    let (id, limiters) = two_limiters(&db).await;
    let mut allowed = 0;
    let mut retry_after = Duration::ZERO;
    for i in 0..12 {
        match limiters[i % 2].acquire(RateBucket::user(id), 5).await.unwrap() {
            RateDecision::Allowed => allowed += 1,
            RateDecision::Limited { retry_after: r } => retry_after = r,
        }
    }
    assert_eq!(allowed, 5);
    assert!(retry_after > Duration::from_secs(5) && retry_after <= Duration::from_secs(12), "{retry_after:?}");
}

/// A lease lives a minute, but one taken under another limit is not spent: a lowered limit
/// holds at the next request.
#[tokio::test]
async fn a_new_limit_drops_the_lease_taken_under_the_old_one() {
    let db = crate::database().await;
    let (id, [limiter, _]) = two_limiters(&db).await;
    let bucket = RateBucket::user(id);
    assert_eq!(limiter.acquire(bucket, 1200).await.unwrap(), RateDecision::Allowed, "a lease of 60 tokens");
    assert_eq!(
        limiter.acquire(bucket, 1).await.unwrap(),
        RateDecision::Allowed,
        "the bucket holds one at the new limit"
    );
    assert!(
        matches!(limiter.acquire(bucket, 1).await.unwrap(), RateDecision::Limited { .. }),
        "the old lease's 59 tokens were not spent under the new limit"
    );
}

#[tokio::test]
async fn leased_tokens_never_let_two_replicas_past_the_limit_together() {
    let db = crate::database().await;
    let (id, limiters) = two_limiters(&db).await;
    let mut allowed = 0;
    let started = std::time::Instant::now();
    for i in 0..300 {
        if limiters[i % 2].acquire(RateBucket::user(id), 120).await.unwrap() == RateDecision::Allowed {
            allowed += 1;
        }
    }
    // The bucket refills at 2 tokens a second while the loop runs; on a loaded machine it runs
    // long enough for that to count.
    let refilled = (started.elapsed().as_secs_f64() * 2.0).ceil() as usize;
    assert!(allowed <= 120 + refilled + 1, "past the limit: {allowed} (refilled {refilled})");
    assert!(allowed >= 120 - 2 * 6, "leases lost too much: {allowed}");
}
