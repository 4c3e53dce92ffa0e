//! [`Drain`]: the process is stopping. Streams end with a last comment and long-polls answer at
//! once, so that clients reconnect to another replica instead of being cut off mid-response.

use std::sync::Arc;

use tokio::sync::watch;

/// Whether the process is draining, shared by every handler and the binary that starts it.
#[derive(Clone)]
pub struct Drain(Arc<watch::Sender<bool>>);

impl Default for Drain {
    fn default() -> Self {
        Self(Arc::new(watch::channel(false).0))
    }
}

impl Drain {
    /// Not draining yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts draining; every waiter of [`Drain::started`] wakes.
    pub fn start(&self) {
        self.0.send_replace(true);
    }

    /// Whether draining has started.
    #[must_use]
    pub fn is_draining(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once draining has started (at once if it has).
    pub fn started(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut receiver = self.0.subscribe();
        async move {
            // An error means the sender is gone, which only happens as the process ends.
            let _ = receiver.wait_for(|draining| *draining).await;
        }
    }
}
