use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use genjobs_domain::ports::{RateBucket, RateDecision, RateLimiter, StoreError};

/// A token bucket per user (or key with a limit of its own): `per_minute` requests in a burst, refilled evenly over a minute.
/// Kept in process: with several replicas, a database-backed limiter replaces it.
#[derive(Debug, Default)]
pub struct TokenBucketLimiter {
    buckets: Mutex<HashMap<RateBucket, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

impl TokenBucketLimiter {
    /// A limiter with every bucket full.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn take(&self, bucket_id: RateBucket, per_minute: u32, now: Instant) -> RateDecision {
        let capacity = f64::from(per_minute.max(1));
        let per_second = capacity / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let bucket = buckets.entry(bucket_id).or_insert(Bucket { tokens: capacity, refilled_at: now });
        let elapsed = now.saturating_duration_since(bucket.refilled_at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(capacity);
        bucket.refilled_at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            RateDecision::Allowed
        } else {
            let wait = (1.0 - bucket.tokens) / per_second;
            RateDecision::Limited { retry_after: Duration::from_secs_f64(wait) }
        }
    }
}

#[async_trait]
impl RateLimiter for TokenBucketLimiter {
    async fn acquire(&self, bucket: RateBucket, per_minute: u32) -> Result<RateDecision, StoreError> {
        Ok(self.take(bucket, per_minute, Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> RateBucket {
        RateBucket::user(genjobs_domain::ids::UserId::new_at(time::OffsetDateTime::now_utc()))
    }

    #[test]
    fn allows_a_burst_of_the_limit_then_refuses_with_a_retry_time() {
        let limiter = TokenBucketLimiter::new();
        let (id, start) = (user(), Instant::now());
        for _ in 0..3 {
            assert_eq!(limiter.take(id, 3, start), RateDecision::Allowed);
        }
        match limiter.take(id, 3, start) {
            RateDecision::Limited { retry_after } => {
                assert!(retry_after > Duration::from_secs(19) && retry_after <= Duration::from_secs(20));
            }
            RateDecision::Allowed => panic!("fourth request in the same instant allowed"),
        }
    }

    #[test]
    fn refills_evenly_over_a_minute() {
        let limiter = TokenBucketLimiter::new();
        let (id, start) = (user(), Instant::now());
        for _ in 0..60 {
            limiter.take(id, 60, start);
        }
        assert!(matches!(limiter.take(id, 60, start), RateDecision::Limited { .. }));
        assert_eq!(limiter.take(id, 60, start + Duration::from_millis(1001)), RateDecision::Allowed);
    }

    #[test]
    fn users_have_separate_buckets() {
        let limiter = TokenBucketLimiter::new();
        let now = Instant::now();
        let (a, b) = (user(), user());
        assert_eq!(limiter.take(a, 1, now), RateDecision::Allowed);
        assert!(matches!(limiter.take(a, 1, now), RateDecision::Limited { .. }));
        assert_eq!(limiter.take(b, 1, now), RateDecision::Allowed);
    }
}
