//! The request rate limit in Postgres, so that replicas share one bucket per user: a token
//! bucket refilled evenly over a minute, taken from in one upsert.

use std::time::Duration;

use async_trait::async_trait;
use diesel::sql_types::{Bool, Double, Uuid as SqlUuid};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use genjobs_domain::ids::UserId;
use genjobs_domain::ports::{RateDecision, RateLimiter, StoreError};

use crate::error::{from_diesel, from_pool};

/// The shared rate limiter.
#[derive(Clone)]
pub struct PgRateLimiter {
    pool: Pool<AsyncPgConnection>,
}

impl PgRateLimiter {
    /// A limiter over `pool`.
    #[must_use]
    pub fn new(pool: Pool<AsyncPgConnection>) -> Self {
        Self { pool }
    }
}

#[derive(diesel::QueryableByName)]
struct Bucket {
    #[diesel(sql_type = Bool)]
    allowed: bool,
    #[diesel(sql_type = Double)]
    tokens: f64,
    #[diesel(sql_type = Double)]
    idle_secs: f64,
}

/// One upsert: refill the bucket to now and take a token when there is one. A refused request
/// leaves the row as it was, so `refilled_at = now()` tells whether the token was taken.
const TAKE: &str = "
INSERT INTO rate_limits AS r (user_id, tokens, refilled_at) VALUES ($1, $2 - 1, now())
ON CONFLICT (user_id) DO UPDATE SET
    tokens = CASE WHEN LEAST($2, r.tokens + EXTRACT(EPOCH FROM (now() - r.refilled_at)) * $2 / 60.0) >= 1
                  THEN LEAST($2, r.tokens + EXTRACT(EPOCH FROM (now() - r.refilled_at)) * $2 / 60.0) - 1
                  ELSE r.tokens END,
    refilled_at = CASE WHEN LEAST($2, r.tokens + EXTRACT(EPOCH FROM (now() - r.refilled_at)) * $2 / 60.0) >= 1
                  THEN now() ELSE r.refilled_at END
RETURNING refilled_at = now() AS allowed, tokens, EXTRACT(EPOCH FROM (now() - refilled_at))::float8 AS idle_secs";

#[async_trait]
impl RateLimiter for PgRateLimiter {
    async fn acquire(&self, user_id: UserId, per_minute: u32) -> Result<RateDecision, StoreError> {
        let capacity = f64::from(per_minute.max(1));
        let mut conn = self.pool.get().await.map_err(from_pool)?;
        let bucket: Bucket = diesel::sql_query(TAKE)
            .bind::<SqlUuid, _>(user_id.as_uuid())
            .bind::<Double, _>(capacity)
            .get_result(&mut conn)
            .await
            .map_err(from_diesel)?;
        if bucket.allowed {
            return Ok(RateDecision::Allowed);
        }
        let per_second = capacity / 60.0;
        let tokens_now = (bucket.tokens + bucket.idle_secs * per_second).min(capacity);
        let wait = ((1.0 - tokens_now) / per_second).max(0.0);
        Ok(RateDecision::Limited { retry_after: Duration::from_secs_f64(wait) })
    }
}
