//! How a driver paces itself: poll intervals, the job timeout, the lease, and the bounds on
//! what it claims, holds and runs at once.

use std::time::Duration;

/// How the driver paces itself.
#[derive(Debug, Clone)]
pub struct DriverSettings {
    /// Time between two polls of one job.
    pub poll_interval: Duration,
    /// Time between two polls of a job nobody watches, when the provider notifies the end of
    /// every job ([`crate::ports::UpstreamProvider::read_notification`]): polls are then only
    /// the safety net for a lost notification. `None` when it does not notify.
    pub unwatched_poll_interval: Option<Duration>,
    /// A job not final this long after acceptance fails with `UPSTREAM_TIMEOUT`.
    pub job_timeout: Duration,
    /// How long a claimed job is reserved for this driver without renewal; another driver takes
    /// it over after.
    pub lease: Duration,
    /// How often the driver looks for new due jobs.
    pub idle_tick: Duration,
    /// Jobs claimed at once.
    pub batch: usize,
    /// Jobs advanced concurrently, which bounds the requests in flight to the provider.
    pub max_in_flight: usize,
    /// Jobs held at most; beyond, the driver leaves due jobs to other replicas.
    pub max_held: usize,
}

impl DriverSettings {
    /// Settings for a poll interval and job timeout, with the rest derived: a tick of a tenth of
    /// the interval (10 to 100 ms) keeps every poll within ±10 % of its time.
    #[must_use]
    pub fn new(poll_interval: Duration, job_timeout: Duration) -> Self {
        Self {
            poll_interval,
            unwatched_poll_interval: None,
            job_timeout,
            lease: Duration::from_secs(20).max(poll_interval * 3),
            idle_tick: (poll_interval / 10).clamp(Duration::from_millis(10), Duration::from_millis(100)),
            batch: 256,
            max_in_flight: 256,
            max_held: 100_000,
        }
    }

    /// The same settings at another poll interval, with the tick derived again; the lease and
    /// the timeout stay as they are.
    #[must_use]
    pub fn with_poll_interval(self, poll_interval: Duration) -> Self {
        let derived = Self::new(poll_interval, self.job_timeout);
        Self { poll_interval, idle_tick: derived.idle_tick, ..self }
    }
}

impl Default for DriverSettings {
    /// The gateway's default poll interval and a 30-minute job timeout.
    fn default() -> Self {
        Self::new(crate::usecases::Settings::default().poll_interval, Duration::from_secs(1800))
    }
}
