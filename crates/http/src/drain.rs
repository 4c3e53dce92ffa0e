//! [`Drain`]: the process is stopping. Streams end with a last comment and long-polls answer at
//! once, so that clients reconnect to another replica instead of being cut off mid-response.

use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use tokio::sync::watch;

/// Whether the process is draining, shared by every handler and the binary that starts it.
#[derive(Clone)]
pub struct Drain {
    sender: Arc<watch::Sender<bool>>,
    /// One wait for the drain, shared: each open stream holds a clone (a pointer and a waker
    /// slot) rather than a wait of its own.
    started: Shared<BoxFuture<'static, ()>>,
}

impl Default for Drain {
    fn default() -> Self {
        let (sender, mut receiver) = watch::channel(false);
        let started = async move {
            // An error means the sender is gone, which only happens as the process ends.
            let _ = receiver.wait_for(|draining| *draining).await;
        };
        Self { sender: Arc::new(sender), started: started.boxed().shared() }
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
        self.sender.send_replace(true);
    }

    /// Whether draining has started.
    #[must_use]
    pub fn is_draining(&self) -> bool {
        *self.sender.borrow()
    }

    /// Completes once draining has started (at once if it has).
    pub fn started(&self) -> impl Future<Output = ()> + Send + 'static {
        self.started.clone()
    }
}
