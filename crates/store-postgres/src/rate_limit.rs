//! The request rate limit in Postgres, so that replicas share one token bucket per user (and per
//! key with a limit of its own: `rate_limits.user_id` holds the bucket's id, see
//! [`RateBucket`]). A replica takes a batch of tokens at a time (a lease) and spends them
//! locally: the buckets stay exact across replicas, since every token spent was taken from the
//! shared bucket first, while most requests cost no database round trip. Tokens of a lease not
//! spent within [`LEASE_LIFETIME`] are dropped, never returned, so a lease can only make the
//! limit stricter.
//!
//! A lease's size follows the replica's demand: it doubles each time a lease is used up before
//! it expires and halves when one expires unspent, between a twentieth and a quarter of the
//! minute's allowance. So a client polling steadily under its limit reaches the database about
//! once a [`LEASE_LIFETIME`], however often it polls, and the tokens a replica can strand (a
//! client that moved to another replica) stay under a quarter of the allowance.

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

/// How long a replica may spend the tokens of one lease. A new limit does not wait for it: a
/// lease taken under another limit is dropped at the bucket's next request, and the limits
/// reach every replica's key cache within a second (`NOTIFY`).
pub const LEASE_LIFETIME: Duration = Duration::from_secs(60);

/// A replica's first lease of a bucket: a twentieth of a minute's allowance (three seconds'
/// worth), at most 1,000 tokens: a user limited to 120 a minute takes 6 tokens, one limited to
/// 5 takes 1.
fn first_lease(per_minute: u32) -> u32 {
    (per_minute / 20).clamp(1, 1000)
}

/// The largest lease: a quarter of a minute's allowance, at least 1 token.
fn largest_lease(per_minute: u32) -> u32 {
    (per_minute / 4).max(1)
}

/// The tokens a replica holds of one bucket.
#[derive(Debug, Clone, Copy)]
struct Lease {
    tokens: u32,
    /// The limit it was taken under: another drops it.
    per_minute: u32,
}

/// How the next lease of a bucket is sized, kept by whoever takes it.
#[derive(Debug, Default)]
struct Sizing {
    /// The last lease taken, 0 before the first.
    last: u32,
    per_minute: u32,
}

impl Sizing {
    /// The size of the next lease, given whether the last one was used up while it lived.
    fn next(&mut self, per_minute: u32, used_up: bool) -> u32 {
        let size = if self.last == 0 || self.per_minute != per_minute {
            first_lease(per_minute)
        } else if used_up {
            self.last.saturating_mul(2)
        } else {
            self.last / 2
        };
        let size = size.clamp(first_lease(per_minute).min(largest_lease(per_minute)), largest_lease(per_minute));
        *self = Self { last: size, per_minute };
        size
    }
}

/// The shared rate limiter.
pub struct PgRateLimiter {
    db: Db,
    /// Tokens left of each bucket's current lease.
    leases: TtlCache<RateBucket, Lease>,
    /// Whose lease is being taken, so that the requests that find a user's lease spent together
    /// wait for one statement rather than each send their own: a herd of 16 upserts of the same
    /// row every lease (queued on its lock, 8 ms each) was most of a GET's p99. It holds how
    /// the next lease is sized.
    refilling: TtlCache<RateBucket, Arc<tokio::sync::Mutex<Sizing>>>,
}

/// What the local lease said about a request.
enum Local {
    Spent,
    /// Its tokens are used up (the lease still lives, under the same limit).
    UsedUp,
    /// None lives, or it was taken under another limit.
    Missing,
}

impl PgRateLimiter {
    /// A limiter over `pool`.
    #[must_use]
    pub fn new(pool: Pool<AsyncPgConnection>) -> Self {
        Self { db: Db::new(pool), leases: TtlCache::new(LEASE_LIFETIME), refilling: TtlCache::new(LEASE_LIFETIME * 10) }
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

    fn spend_leased(&self, bucket: RateBucket, per_minute: u32) -> Local {
        self.leases
            .update(&bucket, |lease| match lease {
                Lease { per_minute: taken_under, .. } if *taken_under != per_minute => Local::Missing,
                Lease { tokens: 0, .. } => Local::UsedUp,
                Lease { tokens, .. } => {
                    *tokens -= 1;
                    Local::Spent
                }
            })
            .unwrap_or(Local::Missing)
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
        let local = self.spend_leased(bucket, per_minute);
        if matches!(local, Local::Spent) {
            return Ok(RateDecision::Allowed);
        }
        let refill = self.refilling.get(&bucket).unwrap_or_else(|| {
            let refill = Arc::default();
            self.refilling.put(bucket, Arc::clone(&refill));
            refill
        });
        let mut sizing = match refill.try_lock() {
            Ok(sizing) => sizing,
            Err(_) => {
                // Another request takes the lease: wait for it, and ask the database only if
                // it left no token (the user is at the limit, which the statement tells).
                let sizing = refill.lock().await;
                if matches!(self.spend_leased(bucket, per_minute), Local::Spent) {
                    return Ok(RateDecision::Allowed);
                }
                sizing
            }
        };
        let capacity = f64::from(per_minute.max(1));
        let lease = i32::try_from(sizing.next(per_minute, matches!(local, Local::UsedUp))).unwrap_or(i32::MAX);
        let take = diesel::sql_query(take_sql())
            .bind::<SqlUuid, _>(bucket.as_uuid())
            .bind::<Double, _>(capacity)
            .bind::<Integer, _>(lease);
        let taken: Taken = self.db.run(async |conn| take.get_result(conn).await).await?;
        if taken.allowed && taken.taken >= 1 {
            let tokens = u32::try_from(taken.taken - 1).unwrap_or(0);
            self.leases.put(bucket, Lease { tokens, per_minute });
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
    use super::*;

    #[test]
    fn a_first_lease_is_a_twentieth_of_a_minute_between_1_and_1000() {
        assert_eq!(first_lease(5), 1);
        assert_eq!(first_lease(120), 6);
        assert_eq!(first_lease(u32::MAX), 1000);
    }

    #[test]
    fn leases_double_while_used_up_and_halve_when_they_expire_within_a_quarter_minute() {
        let mut sizing = Sizing::default();
        assert_eq!(sizing.next(120, false), 6);
        assert_eq!(sizing.next(120, true), 12);
        assert_eq!(sizing.next(120, true), 24);
        assert_eq!(sizing.next(120, true), 30, "at most a quarter of the allowance");
        assert_eq!(sizing.next(120, false), 15);
        assert_eq!(sizing.next(120, false), 7);
        assert_eq!(sizing.next(120, false), 6, "never below the first lease");
        assert_eq!(sizing.next(60, true), 3, "a new limit starts over");
        let mut tiny = Sizing::default();
        assert_eq!((tiny.next(3, true), tiny.next(3, true)), (1, 1));
        let mut huge = Sizing::default();
        assert_eq!(huge.next(1_000_000_000, false), 1000);
        assert_eq!(huge.next(1_000_000_000, true), 2000);
    }
}
