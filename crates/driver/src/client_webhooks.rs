//! The client webhook dispatcher: delivers the outbox of client webhooks, one attempt at a time
//! through the domain's [`WebhookDeliveries`]. Every replica runs one.
//!
//! It sleeps until the earliest event can be claimed, not on a coarse tick, and wakes at once
//! when this process records an event or asks a redelivery ([`JobEvents::announce_webhook`]),
//! or a delivery ends, so that an attempt starts close to its due time. Other job changes do not
//! wake it: under load they came several per job, and each look at the outbox costs the store
//! two statements. Deliveries run as tasks of one [`JoinSet`], at most
//! [`DispatchSettings::max_in_flight`] at once and
//! [`genjobs_domain::usecases::DeliverySettings::per_host`] per destination host.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use genjobs_domain::address::destination_host;
#[cfg(doc)]
use genjobs_domain::ports::JobEvents;
use genjobs_domain::usecases::WebhookDeliveries;
use tokio::task::JoinSet;

use crate::settings::DispatchSettings;

/// Delivers client webhooks.
#[derive(Clone)]
pub struct WebhookDispatcher {
    deliveries: Arc<WebhookDeliveries>,
    settings: DispatchSettings,
}

/// What the dispatcher's wait ended on.
enum Woke {
    /// A delivery to this host ended.
    Delivered(String),
    /// Time to look at the outbox again, or an event was announced.
    Look,
    /// The service stops.
    Shutdown,
}

impl WebhookDispatcher {
    /// A dispatcher making its attempts through `deliveries`.
    #[must_use]
    pub fn new(deliveries: WebhookDeliveries, settings: DispatchSettings) -> Self {
        Self { deliveries: Arc::new(deliveries), settings }
    }

    /// Delivers until `shutdown` completes, then lets the deliveries in flight end (each is
    /// bounded by the transport's timeout) and claims nothing more.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) {
        let ports = self.deliveries.ports();
        let mut shutdown = pin!(shutdown);
        let mut announced = ports.events.subscribe_webhooks();
        let mut in_flight: JoinSet<String> = JoinSet::new();
        let mut per_host: HashMap<String, usize> = HashMap::new();
        let mut draining = false;
        loop {
            if draining && in_flight.is_empty() {
                break;
            }
            let mut nap = self.settings.idle_check;
            if !draining {
                let free = self.settings.max_in_flight.saturating_sub(in_flight.len());
                let now = ports.clock.now();
                if free > 0 {
                    for event in self.deliveries.claim(now, free, &per_host).await {
                        let host = destination_host(&event.url);
                        *per_host.entry(host.clone()).or_default() += 1;
                        let deliveries = Arc::clone(&self.deliveries);
                        in_flight.spawn(async move {
                            if AssertUnwindSafe(deliveries.deliver(event)).catch_unwind().await.is_err() {
                                tracing::error!(%host, "a webhook delivery panicked; it is tried again after its lease");
                            }
                            host
                        });
                    }
                }
                let can_claim_more = in_flight.len() < self.settings.max_in_flight;
                if let Some(at) = self.deliveries.next_claimable_at(now, can_claim_more).await {
                    nap = nap.min(Duration::try_from(at - ports.clock.now()).unwrap_or_default());
                }
            }
            let woke = tokio::select! {
                biased;
                Some(ended) = in_flight.join_next(), if !in_flight.is_empty() => match ended {
                    Ok(host) => Woke::Delivered(host),
                    Err(e) => {
                        tracing::error!(error = %e, "a webhook delivery was cancelled; the dispatcher stops");
                        break;
                    }
                },
                () = ports.clock.sleep(nap) => Woke::Look,
                Some(()) = announced.next() => Woke::Look,
                () = &mut shutdown, if !draining => Woke::Shutdown,
            };
            match woke {
                Woke::Delivered(host) => {
                    // Deliveries end in bursts under load: one look serves all that have ended.
                    let ended = std::iter::once(host)
                        .chain(std::iter::from_fn(|| in_flight.try_join_next().and_then(Result::ok)));
                    for host in ended {
                        if let Some(count) = per_host.get_mut(&host) {
                            *count -= 1;
                            if *count == 0 {
                                per_host.remove(&host);
                            }
                        }
                    }
                }
                Woke::Shutdown => draining = true,
                Woke::Look => {
                    // Many jobs end at once under load: one look serves all of them.
                    while let Some(Some(())) = announced.next().now_or_never() {}
                }
            }
        }
    }
}
