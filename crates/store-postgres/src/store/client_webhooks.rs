//! The outbox of client webhooks and the users' sealed secrets. Events are inserted by the
//! `jobs_client_webhook_event` trigger inside the statement that makes a job final, and a batch's
//! by the `jobs_batch_item_finished` trigger inside the one that makes its last item final (see
//! the migrations), so this module only claims, reads and updates them, by their `id` (the id of
//! the job or the batch). Claims take due events with
//! `FOR UPDATE SKIP LOCKED` under a lease, so each attempt is made by one replica.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Bytea, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use genjobs_domain::client_webhooks::{Attempt, EventId, EventSubject, EventType, WebhookEvent};
use genjobs_domain::ids::{BatchId, JobId, UserId};
use genjobs_domain::ports::{ClaimLimits, OutboxState, StoreError, WebhookStore};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use super::PgStore;
use crate::schema::client_webhook_events;

/// A row of `client_webhook_events`, all but its lease.
#[derive(QueryableByName)]
#[diesel(table_name = client_webhook_events, check_for_backend(diesel::pg::Pg))]
struct EventRow {
    id: Uuid,
    job_id: Option<Uuid>,
    batch_id: Option<Uuid>,
    user_id: Uuid,
    final_state: String,
    url: String,
    occurred_at: OffsetDateTime,
    body: Option<Vec<u8>>,
    attempts: serde_json::Value,
    delivered_at: Option<OffsetDateTime>,
    next_attempt_at: Option<OffsetDateTime>,
}

/// An attempt as the `attempts` column keeps it.
#[derive(Serialize, Deserialize)]
struct AttemptJson {
    #[serde(with = "time::serde::rfc3339")]
    at: OffsetDateTime,
    status: Option<u16>,
    error: Option<String>,
}

impl EventRow {
    fn into_event(self) -> Result<WebhookEvent, StoreError> {
        let corrupt = |what: &str| StoreError::Internal(format!("webhook event {}: bad {what}", self.id));
        let subject = match (self.job_id, self.batch_id) {
            (Some(job_id), None) => EventSubject::Job(JobId::from_uuid(job_id)),
            (None, Some(batch_id)) => EventSubject::Batch(BatchId::from_uuid(batch_id)),
            _ => return Err(corrupt("subject")),
        };
        let event_type = EventType::parse(subject, &self.final_state).ok_or_else(|| corrupt("final_state"))?;
        let attempts: Vec<AttemptJson> =
            serde_json::from_value(self.attempts.clone()).map_err(|_| corrupt("attempts"))?;
        Ok(WebhookEvent {
            subject,
            user_id: UserId::from_uuid(self.user_id),
            event_type,
            url: self.url,
            occurred_at: self.occurred_at,
            body: self.body,
            attempts: attempts.into_iter().map(|a| Attempt { at: a.at, status: a.status, error: a.error }).collect(),
            delivered_at: self.delivered_at,
            next_attempt_at: self.next_attempt_at,
        })
    }
}

const EVENT_COLUMNS: &str = "e.id, e.job_id, e.batch_id, e.user_id, e.final_state, e.url, e.occurred_at, e.body, \
     e.attempts, e.delivered_at, e.next_attempt_at";

/// The earliest due, unleased events of hosts not at their limit (`$4`), locked as a window of
/// `$5`; of those, at most each host's free slots (`$6`, less `$7`/`$8` in flight) and `$3` in
/// all, leased until `$1`.
const CLAIM_DUE: &str = "\
UPDATE client_webhook_events e SET lease_until = $1
FROM (SELECT id FROM (
          SELECT d.id, d.next_attempt_at,
                 row_number() OVER (PARTITION BY d.host ORDER BY d.next_attempt_at) + coalesce(busy.in_flight, 0) AS slot
          FROM (SELECT id, next_attempt_at, host FROM client_webhook_events
                WHERE next_attempt_at <= $2 AND (lease_until IS NULL OR lease_until <= $2) AND host <> ALL($4)
                ORDER BY next_attempt_at LIMIT $5 FOR UPDATE SKIP LOCKED) d
          LEFT JOIN unnest($7::text[], $8::bigint[]) AS busy(host, in_flight) ON busy.host = d.host) ranked
      WHERE slot <= $6
      ORDER BY next_attempt_at LIMIT $3) due
WHERE e.id = due.id
RETURNING ";

/// An event is claimable at its next attempt, or at its lease's end when that is later: the
/// first of the unleased (by the due index) and of the leased (by the lease index).
const OUTBOX_STATE: &str = "\
SELECT LEAST(
         (SELECT min(next_attempt_at) FROM client_webhook_events
          WHERE next_attempt_at IS NOT NULL AND (lease_until IS NULL OR lease_until <= next_attempt_at)),
         (SELECT min(lease_until) FROM client_webhook_events
          WHERE next_attempt_at IS NOT NULL AND lease_until IS NOT NULL AND lease_until > next_attempt_at)
       ) AS next_claimable_at,
       (SELECT min(occurred_at) FROM client_webhook_events WHERE next_attempt_at IS NOT NULL) AS oldest_pending_since";

#[derive(QueryableByName)]
struct OutboxRow {
    #[diesel(sql_type = Nullable<Timestamptz>)]
    next_claimable_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    oldest_pending_since: Option<OffsetDateTime>,
}

#[derive(QueryableByName)]
struct Sealed {
    #[diesel(sql_type = Nullable<Bytea>)]
    sealed: Option<Vec<u8>>,
}

fn events(rows: Vec<EventRow>) -> Result<Vec<WebhookEvent>, StoreError> {
    rows.into_iter().map(EventRow::into_event).collect()
}

#[async_trait]
impl WebhookStore for PgStore {
    async fn claim_due_events(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limits: ClaimLimits,
    ) -> Result<Vec<WebhookEvent>, StoreError> {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let full: Vec<&str> =
            limits.in_flight.keys().filter(|host| limits.free_for(host) == 0).map(String::as_str).collect();
        let (hosts, in_flight): (Vec<&str>, Vec<i64>) =
            limits.in_flight.iter().map(|(host, n)| (host.as_str(), count(*n))).unzip();
        // Enough rows to find each free host's share without locking the whole backlog.
        let window = limits.total.saturating_mul(4).max(64);
        let claim = diesel::sql_query(format!("{CLAIM_DUE}{EVENT_COLUMNS}"))
            .bind::<Timestamptz, _>(lease_until)
            .bind::<Timestamptz, _>(now)
            .bind::<BigInt, _>(count(limits.total))
            .bind::<Array<Text>, _>(full)
            .bind::<BigInt, _>(count(window))
            .bind::<BigInt, _>(count(limits.per_host))
            .bind::<Array<Text>, _>(hosts)
            .bind::<Array<BigInt>, _>(in_flight);
        events(self.in_session(async |conn| claim.load(conn).await).await?)
    }

    async fn defer_events(&self, events: Vec<EventId>, until: OffsetDateTime) -> Result<(), StoreError> {
        let ids: Vec<Uuid> = events.into_iter().map(EventId::as_uuid).collect();
        let defer = diesel::sql_query("UPDATE client_webhook_events SET lease_until = $1 WHERE id = ANY($2)")
            .bind::<Timestamptz, _>(until)
            .bind::<Array<SqlUuid>, _>(ids);
        self.in_session(async |conn| defer.execute(conn).await).await?;
        Ok(())
    }

    async fn fix_event_body(&self, event: EventId, body: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        let fix = diesel::sql_query(
            "UPDATE client_webhook_events SET body = COALESCE(body, $1) WHERE id = $2 RETURNING body AS sealed",
        )
        .bind::<Bytea, _>(body)
        .bind::<SqlUuid, _>(event.as_uuid());
        let kept: Vec<Sealed> = self.in_session(async |conn| fix.load(conn).await).await?;
        kept.into_iter().next().and_then(|row| row.sealed).ok_or_else(|| StoreError::Internal("no such event".into()))
    }

    async fn record_attempt(
        &self,
        event: EventId,
        attempt: Attempt,
        next_attempt_at: Option<OffsetDateTime>,
    ) -> Result<(), StoreError> {
        let delivered = attempt.delivered();
        let at = attempt.at;
        let json = serde_json::json!([AttemptJson { at, status: attempt.status, error: attempt.error }]);
        let record = diesel::sql_query(
            "UPDATE client_webhook_events SET attempts = attempts || $1, \
             delivered_at = CASE WHEN $2 THEN $3 ELSE delivered_at END, next_attempt_at = $4, lease_until = NULL \
             WHERE id = $5",
        )
        .bind::<Jsonb, _>(json)
        .bind::<Bool, _>(delivered)
        .bind::<Timestamptz, _>(at)
        .bind::<Nullable<Timestamptz>, _>(next_attempt_at)
        .bind::<SqlUuid, _>(event.as_uuid());
        self.in_session(async |conn| record.execute(conn).await).await?;
        Ok(())
    }

    async fn webhook_events(&self, event: EventId) -> Result<Vec<WebhookEvent>, StoreError> {
        let read = diesel::sql_query(format!("SELECT {EVENT_COLUMNS} FROM client_webhook_events e WHERE e.id = $1"))
            .bind::<SqlUuid, _>(event.as_uuid());
        events(self.in_session(async |conn| read.load(conn).await).await?)
    }

    async fn redeliver(&self, event: EventId, now: OffsetDateTime) -> Result<bool, StoreError> {
        let redeliver = diesel::sql_query("UPDATE client_webhook_events SET next_attempt_at = $1 WHERE id = $2")
            .bind::<Timestamptz, _>(now)
            .bind::<SqlUuid, _>(event.as_uuid());
        Ok(self.in_session(async |conn| redeliver.execute(conn).await).await? > 0)
    }

    async fn outbox_state(&self) -> Result<OutboxState, StoreError> {
        let row: OutboxRow =
            self.in_session(async |conn| diesel::sql_query(OUTBOX_STATE).get_result(conn).await).await?;
        Ok(OutboxState { next_claimable_at: row.next_claimable_at, oldest_pending_since: row.oldest_pending_since })
    }

    async fn webhook_secret(&self, user_id: UserId) -> Result<Option<Vec<u8>>, StoreError> {
        let read = diesel::sql_query("SELECT sealed FROM webhook_secrets WHERE user_id = $1")
            .bind::<SqlUuid, _>(user_id.as_uuid());
        let rows: Vec<Sealed> = self.in_session(async |conn| read.load(conn).await).await?;
        Ok(rows.into_iter().next().and_then(|row| row.sealed))
    }

    async fn keep_webhook_secret(
        &self,
        user_id: UserId,
        sealed: Vec<u8>,
        replace: bool,
    ) -> Result<Vec<u8>, StoreError> {
        // Without `replace`, the conflict's no-op update returns the secret already there.
        let keep = diesel::sql_query(
            "INSERT INTO webhook_secrets (user_id, sealed) VALUES ($1, $2) ON CONFLICT (user_id) DO UPDATE \
             SET sealed = CASE WHEN $3 THEN EXCLUDED.sealed ELSE webhook_secrets.sealed END, updated_at = now() \
             RETURNING sealed",
        )
        .bind::<SqlUuid, _>(user_id.as_uuid())
        .bind::<Bytea, _>(sealed)
        .bind::<Bool, _>(replace);
        let kept: Vec<Sealed> = self.in_session(async |conn| keep.load(conn).await).await?;
        kept.into_iter().next().and_then(|row| row.sealed).ok_or_else(|| StoreError::Internal("secret not kept".into()))
    }
}
