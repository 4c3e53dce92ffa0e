//! What the driver's tests share: tokio's paused clock as the domain's clock, and the one output
//! a scripted provider delivers.

use std::time::Duration;

use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use genjobs_domain::ports::Clock;
use time::OffsetDateTime;

/// The driver's clock, following tokio's (paused) time from a fixed origin: it moves only when
/// every task waits, so the tests take no wall-clock time.
pub struct PausedClock {
    origin: OffsetDateTime,
    start: tokio::time::Instant,
}

impl PausedClock {
    /// A clock starting now.
    pub fn new() -> Self {
        Self { origin: OffsetDateTime::now_utc(), start: tokio::time::Instant::now() }
    }
}

#[async_trait::async_trait]
impl Clock for PausedClock {
    fn now(&self) -> OffsetDateTime {
        self.origin + self.start.elapsed()
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// One image, as a scripted provider's result.
pub fn one_image() -> Vec<OutputItem> {
    vec![OutputItem {
        url: "https://cdn/a.png".into(),
        kind: OutputKind::Image,
        meta: OutputMeta::default(),
        copy: None,
    }]
}
