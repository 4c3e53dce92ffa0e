use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use genjobs_domain::ids::JobId;
use genjobs_domain::ports::{JobChanges, JobEvents};
use tokio::sync::{broadcast, watch};
use tokio_stream::wrappers::{BroadcastStream, WatchStream};

/// In-process job change notifications: one broadcast channel per watched job.
///
/// A channel exists only while someone watches its job; publishing to a job nobody watches costs
/// one map look-up. A lagging subscriber still wakes (a lag means "something changed").
#[derive(Debug)]
pub struct EventHub {
    channels: Mutex<Channels>,
    every_change: broadcast::Sender<JobId>,
    watches: broadcast::Sender<JobId>,
    webhooks: watch::Sender<()>,
    capacity: watch::Sender<()>,
}

impl Default for EventHub {
    fn default() -> Self {
        Self {
            channels: Mutex::default(),
            every_change: broadcast::channel(4096).0,
            watches: broadcast::channel(4096).0,
            // Announcements not yet seen are one wake-up: a dispatcher looks at the whole outbox.
            webhooks: watch::channel(()).0,
            // Slots freed and not yet seen are one wake-up: a driver hurries all its waiting jobs.
            capacity: watch::channel(()).0,
        }
    }
}

#[derive(Debug, Default)]
struct Channels {
    by_job: HashMap<JobId, broadcast::Sender<()>>,
    size_after_last_sweep: usize,
}

impl EventHub {
    /// A hub with no subscribers.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn channels(&self) -> MutexGuard<'_, Channels> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the job's subscribers in this process.
    pub fn notify(&self, job_id: JobId) {
        // No receiver is not an error: nobody follows every change.
        let _ = self.every_change.send(job_id);
        let mut channels = self.channels();
        if let Some(sender) = channels.by_job.get(&job_id)
            && sender.send(()).is_err()
        {
            channels.by_job.remove(&job_id);
        }
    }

    /// Tells this process's driver that someone waits on the job.
    pub fn notify_watch(&self, job_id: JobId) {
        // No receiver is not an error: a process may run no driver.
        let _ = self.watches.send(job_id);
    }

    /// Tells this process's driver that a slot of a provider's keys may have freed.
    pub fn notify_capacity(&self) {
        self.capacity.send_replace(());
    }

    /// Wakes every subscriber in this process, after notifications may have been missed.
    pub fn notify_all(&self) {
        let mut channels = self.channels();
        channels.by_job.retain(|_, sender| sender.send(()).is_ok());
    }

    /// Jobs with a channel, for tests of the clean-up.
    #[must_use]
    pub fn watched_jobs(&self) -> usize {
        self.channels().by_job.len()
    }
}

#[async_trait]
impl JobEvents for EventHub {
    async fn publish(&self, job_id: JobId) {
        self.notify(job_id);
    }

    fn subscribe(&self, job_id: JobId) -> JobChanges {
        let mut channels = self.channels();
        // Channels whose subscribers all left and whose job never changed again would stay
        // forever; sweep them whenever the map has doubled since the last sweep.
        if channels.by_job.len() > 2 * channels.size_after_last_sweep.max(512) {
            channels.by_job.retain(|_, sender| sender.receiver_count() > 0);
            channels.size_after_last_sweep = channels.by_job.len();
        }
        let receiver = channels.by_job.entry(job_id).or_insert_with(|| broadcast::channel(1).0).subscribe();
        BroadcastStream::new(receiver).map(|_| ()).boxed()
    }

    fn subscribe_all(&self) -> BoxStream<'static, JobId> {
        BroadcastStream::new(self.every_change.subscribe()).filter_map(|id| std::future::ready(id.ok())).boxed()
    }

    async fn watch(&self, job_id: JobId) {
        self.notify_watch(job_id);
    }

    fn subscribe_watches(&self) -> BoxStream<'static, JobId> {
        BroadcastStream::new(self.watches.subscribe()).filter_map(|id| std::future::ready(id.ok())).boxed()
    }

    fn announce_webhook(&self) {
        self.webhooks.send_replace(());
    }

    fn subscribe_webhooks(&self) -> BoxStream<'static, ()> {
        WatchStream::from_changes(self.webhooks.subscribe()).boxed()
    }

    async fn free_capacity(&self, _: JobId) {
        self.notify_capacity();
    }

    fn subscribe_capacity(&self) -> BoxStream<'static, ()> {
        WatchStream::from_changes(self.capacity.subscribe()).boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::FutureExt;

    use super::*;

    fn job() -> JobId {
        JobId::new_at(time::OffsetDateTime::now_utc())
    }

    #[tokio::test]
    async fn subscribers_of_a_job_wake_on_its_changes_only() {
        let hub = EventHub::new();
        let (a, b) = (job(), job());
        let mut watching_a = hub.subscribe(a);
        let mut watching_b = hub.subscribe(b);
        hub.publish(a).await;
        assert_eq!(tokio::time::timeout(Duration::from_secs(1), watching_a.next()).await.unwrap(), Some(()));
        assert!(tokio::time::timeout(Duration::from_millis(20), watching_b.next()).await.is_err());
    }

    #[tokio::test]
    async fn every_change_reaches_a_follower_of_all_jobs() {
        let hub = EventHub::new();
        let mut all = hub.subscribe_all();
        let (a, b) = (job(), job());
        hub.publish(a).await;
        hub.publish(b).await;
        assert_eq!(all.next().await, Some(a));
        assert_eq!(all.next().await, Some(b));
    }

    #[tokio::test]
    async fn watches_reach_the_followers_of_watches_only() {
        let hub = EventHub::new();
        let (mut watches, mut all) = (hub.subscribe_watches(), hub.subscribe_all());
        let id = job();
        hub.watch(id).await;
        assert_eq!(watches.next().await, Some(id));
        assert!(tokio::time::timeout(Duration::from_millis(20), all.next()).await.is_err());
    }

    #[tokio::test]
    async fn channels_go_away_with_their_subscribers() {
        let hub = EventHub::new();
        let id = job();
        drop(hub.subscribe(id));
        assert_eq!(hub.watched_jobs(), 1);
        hub.publish(id).await;
        assert_eq!(hub.watched_jobs(), 0);
    }

    #[tokio::test]
    async fn a_lagging_subscriber_still_wakes() {
        let hub = EventHub::new();
        let id = job();
        let mut changes = hub.subscribe(id);
        for _ in 0..5 {
            hub.publish(id).await;
        }
        assert_eq!(tokio::time::timeout(Duration::from_secs(1), changes.next()).await.unwrap(), Some(()));
    }

    #[tokio::test]
    async fn webhook_announcements_wake_their_subscribers_once_for_many() {
        let hub = EventHub::new();
        let mut announced = hub.subscribe_webhooks();
        hub.publish(job()).await;
        assert!(announced.next().now_or_never().is_none(), "a job change is no announcement");
        for _ in 0..3 {
            hub.announce_webhook();
        }
        assert_eq!(announced.next().now_or_never(), Some(Some(())));
        assert!(announced.next().now_or_never().is_none(), "three announcements before a look are one wake-up");
    }
}
