//! Job change notifications across replicas: `pg_notify` on publish, and one dedicated connection
//! per process that `LISTEN`s and wakes the local [`EventHub`]. Notifications that arrive while
//! others are being sent go together in one statement ([`Grouped`]): under load a driver
//! publishes a change per job step, and one round trip each held a pooled connection that
//! submissions waited for. The same connection hears key revocations and drops them from the
//! key cache, and catalog changes, which wake the process's catalog followers.
//!
//! The job cache serves reads with no query only while this connection is known to hear every
//! change: it is told the moment the connection is lost or found, and an idle connection is
//! checked every [`HEARTBEAT`], so that one that died silently is found within two of them.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use genjobs_domain::ids::{JobId, KeyPrefix};
use genjobs_domain::ports::{JobChanges, JobEvents};
use genjobs_runtime::EventHub;
use tokio::task::JoinHandle;

use crate::cache::KeyCache;
use crate::catalog_signal::CatalogSignal;
use crate::channels::{
    CAPACITY_CHANNEL, CATALOG_CHANNEL, JOB_ROWS_CHANNEL, JOBS_CHANNEL, KEYS_CHANNEL, WATCHES_CHANNEL,
};
use crate::group::Grouped;
use crate::job_cache::JobCache;
use crate::pool::{Pooler, open_connection};
use crate::session::Db;

/// How long the listener waits idle before it checks its connection, and how long that check
/// may take.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// Job events over Postgres.
pub struct PgEvents {
    hub: Arc<EventHub>,
    origin: String,
    db: Db,
    sending: Grouped<Notification, Result<(), String>>,
}

/// A notification waiting for its group.
struct Notification {
    channel: &'static str,
    job_id: JobId,
}

impl PgEvents {
    /// Events published through `pool` and delivered to the `hub` of `listeners` by [`listen`],
    /// which knows this process's changes by their origin.
    #[must_use]
    pub fn new(listeners: &Listeners, pool: Pool<AsyncPgConnection>) -> Self {
        let (hub, origin) = (Arc::clone(&listeners.hub), listeners.origin.clone());
        Self { hub, origin, db: Db::new(pool), sending: Grouped::default() }
    }

    /// Publishes through a pooler of kind `pooler` (see [`Pooler`]); `NOTIFY` is sent when its
    /// transaction commits, as on a direct connection.
    #[must_use]
    pub fn with_pooler(self, pooler: Pooler) -> Self {
        Self { db: Db { pooler, ..self.db }, ..self }
    }

    /// Gives up a notification after `deadline` (see [`crate::PgSettings::statement_timeout`]).
    #[must_use]
    pub fn with_deadline(self, deadline: Duration) -> Self {
        Self { db: Db { deadline, ..self.db }, ..self }
    }
}

#[async_trait]
impl JobEvents for PgEvents {
    async fn publish(&self, job_id: JobId) {
        // Local waiters wake at once; other replicas through NOTIFY, which this one hears too
        // and knows by its origin.
        self.hub.notify(job_id);
        if let Err(error) = self.notify(JOBS_CHANNEL, job_id).await {
            tracing::warn!(job_id = %job_id, %error, "could not notify other replicas; they will see the change at their next check");
        }
    }

    fn subscribe(&self, job_id: JobId) -> JobChanges {
        self.hub.subscribe(job_id)
    }

    fn subscribe_all(&self) -> BoxStream<'static, JobId> {
        self.hub.subscribe_all()
    }

    async fn watch(&self, job_id: JobId) {
        // The replica holding the job may be another; every replica hears it through the
        // listener, this one included.
        if let Err(error) = self.notify(WATCHES_CHANNEL, job_id).await {
            self.hub.notify_watch(job_id);
            tracing::warn!(job_id = %job_id, %error, "could not tell other replicas a job is watched; it may be polled slowly");
        }
    }

    fn subscribe_watches(&self) -> BoxStream<'static, JobId> {
        self.hub.subscribe_watches()
    }

    fn announce_webhook(&self) {
        self.hub.announce_webhook();
    }

    fn subscribe_webhooks(&self) -> BoxStream<'static, ()> {
        self.hub.subscribe_webhooks()
    }

    async fn free_capacity(&self, job_id: JobId) {
        // Every replica hears it through the listener, this one included.
        if let Err(error) = self.notify(CAPACITY_CHANNEL, job_id).await {
            self.hub.notify_capacity();
            tracing::warn!(job_id = %job_id, %error, "could not tell other replicas a slot freed; their waiting jobs look at their next check");
        }
    }

    fn subscribe_capacity(&self) -> BoxStream<'static, ()> {
        self.hub.subscribe_capacity()
    }
}

impl PgEvents {
    /// Tells every replica that job `job_id` changed without a new state, so that their caches
    /// drop it; its waiters are not woken.
    pub(crate) async fn announce_row(&self, job_id: JobId) {
        if let Err(error) = self.notify(JOB_ROWS_CHANNEL, job_id).await {
            tracing::warn!(job_id = %job_id, %error, "could not announce a job's change to other replicas; their caches are dropped when their listeners reconnect");
        }
    }

    async fn notify(&self, channel: &'static str, job_id: JobId) -> Result<(), String> {
        self.sending
            .join(
                Notification { channel, job_id },
                async |group: &[Notification]| self.send(group).await,
                |sent, _| sent.clone(),
            )
            .await
            .unwrap_or_else(|| Err("the notification was interrupted".into()))
    }

    async fn send(&self, group: &[Notification]) -> Result<(), String> {
        let channels: Vec<&str> = group.iter().map(|n| n.channel).collect();
        let payloads: Vec<String> = group
            .iter()
            .map(|n| match n.channel {
                JOBS_CHANNEL | JOB_ROWS_CHANNEL => format!("{} {}", n.job_id, self.origin),
                _ => n.job_id.to_string(),
            })
            .collect();
        let notify = diesel::sql_query(
            "SELECT pg_notify(channel, payload) FROM unnest($1::text[], $2::text[]) AS n(channel, payload)",
        )
        .bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(channels)
        .bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(payloads);
        self.db.run(async |conn| notify.execute(conn).await).await.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// What the listener keeps fresh: the local waiters and the caches.
#[derive(Clone)]
pub struct Listeners {
    /// Wakes local waiters of a changed job.
    pub hub: Arc<EventHub>,
    /// Drops revoked keys.
    pub keys: Arc<KeyCache>,
    /// Evicts changed jobs.
    pub jobs: Arc<JobCache>,
    /// Wakes the catalog followers.
    pub catalog: Arc<CatalogSignal>,
    /// This process among the replicas: a job change it published itself already woke its
    /// waiters and left its cache current, so its echo is not acted on again (it used to cost a
    /// re-read of the job by the driver holding it for every step that changed a job).
    pub origin: String,
}

/// Listens for job changes and key revocations until aborted, reconnecting after a failure.
/// While it is disconnected the job cache serves nothing and the key cache trusts its entries
/// for its time-to-live only; after a reconnection the caches are emptied and every local waiter
/// is woken, since notifications may have been missed.
pub fn listen(url: String, listeners: Listeners) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut reconnecting = false;
        loop {
            let ended = listen_once(&url, &listeners, reconnecting).await;
            listeners.jobs.lost();
            listeners.keys.lost();
            match ended {
                Ok(()) => tracing::warn!("notification stream ended; reconnecting"),
                Err(error) => tracing::warn!(%error, "notification listener failed; reconnecting"),
            }
            reconnecting = true;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

async fn listen_once(url: &str, listeners: &Listeners, reconnecting: bool) -> Result<(), String> {
    let Listeners { hub, keys, jobs, catalog, origin } = listeners;
    let mut conn = open_connection(url, Duration::ZERO, Duration::from_secs(5)).await.map_err(|e| e.to_string())?;
    for channel in [JOBS_CHANNEL, JOB_ROWS_CHANNEL, WATCHES_CHANNEL, CAPACITY_CHANNEL, KEYS_CHANNEL, CATALOG_CHANNEL] {
        diesel::sql_query(format!("LISTEN {channel}")).execute(&mut conn).await.map_err(|e| e.to_string())?;
    }
    jobs.listening();
    keys.listening();
    if reconnecting {
        keys.clear();
        hub.notify_all();
        hub.notify_capacity();
        catalog.changed();
    }
    tracing::info!("listening for job changes and key revocations");
    loop {
        let next = {
            let mut notifications = std::pin::pin!(conn.notifications_stream());
            tokio::time::timeout(HEARTBEAT, notifications.next()).await
        };
        let notification = match next {
            Ok(Some(notification)) => notification.map_err(|e| e.to_string())?,
            Ok(None) => return Ok(()),
            Err(_idle) => {
                // Notifications that arrive meanwhile wait in the connection's queue.
                let check = diesel::sql_query("SELECT 1").execute(&mut conn);
                tokio::time::timeout(HEARTBEAT, check)
                    .await
                    .map_err(|_| "the listening connection did not answer its heartbeat".to_owned())?
                    .map_err(|e| e.to_string())?;
                continue;
            }
        };
        match notification.channel.as_str() {
            channel @ (JOBS_CHANNEL | JOB_ROWS_CHANNEL) => {
                let (id, from) = notification.payload.split_once(' ').unwrap_or((&notification.payload, ""));
                match uuid::Uuid::from_str(id) {
                    Ok(_) if from == origin.as_str() => {}
                    Ok(id) => {
                        // Evict first, so that the woken waiters read the new state.
                        jobs.forget(&JobId::from_uuid(id));
                        if channel == JOBS_CHANNEL {
                            hub.notify(JobId::from_uuid(id));
                        }
                    }
                    Err(_) => tracing::warn!(payload = %notification.payload, "malformed job notification"),
                }
            }
            WATCHES_CHANNEL => match uuid::Uuid::from_str(&notification.payload) {
                Ok(id) => hub.notify_watch(JobId::from_uuid(id)),
                Err(_) => tracing::warn!(payload = %notification.payload, "malformed watch notification"),
            },
            CAPACITY_CHANNEL => hub.notify_capacity(),
            KEYS_CHANNEL => keys.forget(&KeyPrefix::of(&notification.payload)),
            CATALOG_CHANNEL => catalog.changed(),
            _ => {}
        }
    }
}
