//! How the driver and the dispatcher pace themselves: what a step and a delivery follow (the
//! domain's rules), and the bounds on what is claimed, held and run at once.

use std::time::Duration;

use genjobs_domain::usecases::{DeliverySettings, Settings, StepSettings};

/// How the job driver paces itself.
#[derive(Debug, Clone)]
pub struct DriverSettings {
    /// The poll interval, the job timeout and the lease each step follows.
    pub steps: StepSettings,
    /// Time between two polls of a job nobody watches, when the provider notifies the end of
    /// every job ([`genjobs_domain::ports::UpstreamProvider::read_notification`]): polls are then
    /// only the safety net for a lost notification. `None` when it does not notify.
    pub unwatched_poll_interval: Option<Duration>,
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
    /// Settings for a poll interval and job timeout, with the rest derived: a lease of three
    /// intervals (20 s at least), and a tick of a tenth of the interval (10 to 100 ms), which
    /// keeps every poll within ±10 % of its time.
    #[must_use]
    pub fn new(poll_interval: Duration, job_timeout: Duration) -> Self {
        Self {
            steps: StepSettings { poll_interval, job_timeout, lease: Duration::from_secs(20).max(poll_interval * 3) },
            unwatched_poll_interval: None,
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
        let derived = Self::new(poll_interval, self.steps.job_timeout);
        Self { steps: StepSettings { poll_interval, ..self.steps }, idle_tick: derived.idle_tick, ..self }
    }

    /// The same settings with another lease.
    #[must_use]
    pub fn with_lease(self, lease: Duration) -> Self {
        Self { steps: StepSettings { lease, ..self.steps }, ..self }
    }

    /// The same settings with another job timeout.
    #[must_use]
    pub fn with_job_timeout(self, job_timeout: Duration) -> Self {
        Self { steps: StepSettings { job_timeout, ..self.steps }, ..self }
    }
}

impl Default for DriverSettings {
    /// The use cases' default poll interval and a 30-minute job timeout.
    fn default() -> Self {
        Self::new(Settings::default().poll_interval, Duration::from_secs(1800))
    }
}

/// How the client webhook dispatcher works.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// How events are claimed and tried.
    pub deliveries: DeliverySettings,
    /// Deliveries at once.
    pub max_in_flight: usize,
    /// The longest sleep: how soon an event recorded by a replica that could not wake this one
    /// is seen.
    pub idle_check: Duration,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self { deliveries: DeliverySettings::default(), max_in_flight: 256, idle_check: Duration::from_secs(1) }
    }
}
