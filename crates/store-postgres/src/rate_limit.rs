//! The request rate limit in Postgres, so that replicas share one token bucket per user (and per
//! key with a limit of its own: `rate_limits.user_id` holds the bucket's id, see
//! [`RateBucket`]). A
//! replica takes a small batch of tokens at a time (a lease) and spends them locally: the buckets
//! stay exact across replicas, since every token spent was taken from the shared bucket first,
//! while most requests cost no database round trip. Tokens of a lease not spent within
//! [`LEASE_LIFETIME`] are dropped, never returned, so a lease can only make the limit stricter.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use diesel::sql_types::{Bool, Double, Integer, Uuid as SqlUuid};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use genjobs_domain::ports::{RateBucket, RateDecision, RateLimiter, StoreError};

use crate::cache::TtlCache;
use crate::pool::Pooler;
use crate::session::Db;

/// How long a replica may spend the tokens of one lease.
pub const LEASE_LIFETIME: Duration = Duration::from_secs(1);

/// A lease is a twentieth of a minute's allowance (three seconds' worth), at most 1,000 tokens:
/// a user limited to 120 a minute takes 6 tokens per round trip, one limited to 5 takes 1.
fn lease_size(per_minute: u32) -> u32 {
    (per_minute / 20).clamp(1, 1000)
}

/// The shared rate limiter.
pub struct PgRateLimiter {
    db: Db,
    /// Tokens left of each user's current lease.
    leases: TtlCache<RateBucket, u32>,
    /// Whose lease is being taken, so that the requests that find a user's lease spent together
    /// wait for one statement rather than each send their own: a herd of 16 upserts of the same
    /// row every lease (queued on its lock, 8 ms each) was most of a GET's p99.
    refilling: TtlCache<RateBucket, Arc<tokio::sync::Mutex<()>>>,
}

impl PgRateLimiter {
    /// A limiter over `pool`.
    #[must_use]
    pub fn new(pool: Pool<AsyncPgConnection>) -> Self {
        Self { db: Db::new(pool), leases: TtlCache::new(LEASE_LIFETIME), refilling: TtlCache::new(LEASE_LIFETIME * 60) }
    }

    /// Works through a pooler of kind `pooler` (see [`Pooler`]).
    #[must_use]
    pub fn with_pooler(self, pooler: Pooler) -> Self {
        Self { db: Db { pooler, ..self.db }, ..self }
    }

    /// Gives up a lease's statement after `deadline` (see
    /// [`crate::PgSettings::statement_timeout`]).
    #[must_use]
    pub fn with_deadline(self, deadline: Duration) -> Self {
        Self { db: Db { deadline, ..self.db }, ..self }
    }

    fn spend_leased(&self, bucket: RateBucket) -> bool {
        self.leases
            .update(&bucket, |tokens| {
                let spent = *tokens > 0;
                *tokens = tokens.saturating_sub(1);
                spent
            })
            .unwrap_or(false)
    }
}

#[derive(diesel::QueryableByName)]
struct Taken {
    #[diesel(sql_type = Bool)]
    allowed: bool,
    #[diesel(sql_type = Integer)]
    taken: i32,
    #[diesel(sql_type = Double)]
    tokens: f64,
    #[diesel(sql_type = Double)]
    idle_secs: f64,
}

/// Tokens in the bucket now: the stored ones plus the refill since, up to the capacity `$2`.
const AVAILABLE: &str = "LEAST($2, r.tokens + EXTRACT(EPOCH FROM (now() - r.refilled_at)) * $2 / 60.0)";

/// One upsert: refill the bucket to now and take up to `$3` whole tokens when there is one. A
/// refused request leaves the row as it was, so `refilled_at = now()` tells whether tokens were
/// taken. The row lock of `ON CONFLICT DO UPDATE` serialises replicas.
fn take_sql() -> String {
    format!(
        "INSERT INTO rate_limits AS r (user_id, tokens, refilled_at, taken)
         VALUES ($1, $2 - LEAST($3, $2), now(), LEAST($3, $2)::int)
         ON CONFLICT (user_id) DO UPDATE SET
             tokens = CASE WHEN {a} >= 1 THEN {a} - LEAST($3, floor({a})) ELSE r.tokens END,
             taken = CASE WHEN {a} >= 1 THEN LEAST($3, floor({a}))::int ELSE 0 END,
             refilled_at = CASE WHEN {a} >= 1 THEN now() ELSE r.refilled_at END
         RETURNING refilled_at = now() AS allowed, taken, tokens,
                   EXTRACT(EPOCH FROM (now() - refilled_at))::float8 AS idle_secs",
        a = AVAILABLE
    )
}

#[async_trait]
impl RateLimiter for PgRateLimiter {
    async fn acquire(&self, bucket: RateBucket, per_minute: u32) -> Result<RateDecision, StoreError> {
        if self.spend_leased(bucket) {
            return Ok(RateDecision::Allowed);
        }
        let refill = self.refilling.get(&bucket).unwrap_or_else(|| {
            let refill = Arc::default();
            self.refilling.put(bucket, Arc::clone(&refill));
            refill
        });
        let _taking = match refill.try_lock() {
            Ok(taking) => Some(taking),
            Err(_) => {
                // Another request takes the lease: wait for it, and ask the database only if
                // it left no token (the user is at the limit, which the statement tells).
                drop(refill.lock().await);
                if self.spend_leased(bucket) {
                    return Ok(RateDecision::Allowed);
                }
                None
            }
        };
        let capacity = f64::from(per_minute.max(1));
        let lease = i32::try_from(lease_size(per_minute)).unwrap_or(1);
        let take = diesel::sql_query(take_sql())
            .bind::<SqlUuid, _>(bucket.as_uuid())
            .bind::<Double, _>(capacity)
            .bind::<Integer, _>(lease);
        let taken: Taken = self.db.run(async |conn| take.get_result(conn).await).await?;
        if taken.allowed && taken.taken >= 1 {
            self.leases.put(bucket, u32::try_from(taken.taken - 1).unwrap_or(0));
            return Ok(RateDecision::Allowed);
        }
        let per_second = capacity / 60.0;
        let tokens_now = (taken.tokens + taken.idle_secs * per_second).min(capacity);
        let wait = ((1.0 - tokens_now) / per_second).max(0.0);
        Ok(RateDecision::Limited { retry_after: Duration::from_secs_f64(wait) })
    }
}

#[cfg(test)]
mod tests {
    use super::lease_size;

    #[test]
    fn leases_are_a_twentieth_of_a_minute_between_1_and_1000() {
        assert_eq!(lease_size(5), 1);
        assert_eq!(lease_size(120), 6);
        assert_eq!(lease_size(u32::MAX), 1000);
    }
}
