//! The in-memory way from this process's submissions to its driver
//! ([`genjobs_domain::ports::JobHandoff`]): an unbounded channel whose receiver the driver's
//! first run takes, and a flag the driver lowers as it stops, after which submissions accept
//! jobs for any driver again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use genjobs_domain::job::Job;
use genjobs_domain::ports::JobHandoff;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The submissions' end: passes each job they accept to the driver of its process.
pub(crate) struct Handoff {
    jobs: UnboundedSender<Box<Job>>,
    open: Arc<AtomicBool>,
    lease: Duration,
}

/// The driver's end, taken by the first [`super::JobDriver::run_until`].
#[derive(Clone)]
pub(crate) struct Inbox {
    shared: Arc<Mutex<Option<UnboundedReceiver<Box<Job>>>>>,
    open: Arc<AtomicBool>,
}

/// A handoff and its inbox, the driver's lease being `lease`.
pub(crate) fn channel(lease: Duration) -> (Arc<Handoff>, Inbox) {
    let (jobs, receiver) = unbounded_channel();
    let open = Arc::new(AtomicBool::new(true));
    let handoff = Arc::new(Handoff { jobs, open: Arc::clone(&open), lease });
    (handoff, Inbox { shared: Arc::new(Mutex::new(Some(receiver))), open })
}

impl JobHandoff for Handoff {
    fn open_lease(&self) -> Option<Duration> {
        (self.open.load(Ordering::Acquire) && !self.jobs.is_closed()).then_some(self.lease)
    }

    fn send(&self, job: Job) -> Result<(), Box<Job>> {
        self.jobs.send(Box::new(job)).map_err(|e| e.0)
    }
}

impl Inbox {
    /// The receiver, for the one run that drives the handed jobs; `None` once taken.
    pub(crate) fn take(&self) -> Option<UnboundedReceiver<Box<Job>>> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Stops handing jobs to this driver: submissions accept new ones for any driver.
    pub(crate) fn shut(&self) {
        self.open.store(false, Ordering::Release);
    }
}
