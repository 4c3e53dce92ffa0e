//! The in-memory way from this process's submissions to its driver
//! ([`genjobs_domain::ports::JobHandoff`]): an unbounded channel whose receiver the driver's
//! first run takes, and the lease that run holds, which handed jobs go under. The lease is
//! chosen before the run starts it, so that jobs accepted meanwhile wait in the channel; the run
//! replaces it when it runs out, and clears it as it stops, after which submissions accept jobs
//! for any driver again.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use genjobs_domain::ids::LeaseId;
use genjobs_domain::job::Job;
use genjobs_domain::ports::{JobHandoff, OpenLease};
use time::OffsetDateTime;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The submissions' end: passes each job they accept to the driver of its process.
pub(crate) struct Handoff {
    jobs: UnboundedSender<Box<Job>>,
    lease: Arc<Mutex<Option<LeaseId>>>,
    length: Duration,
}

/// The driver's end, taken by the first [`super::JobDriver::run_until`].
#[derive(Clone)]
pub(crate) struct Inbox {
    shared: Arc<Mutex<Option<UnboundedReceiver<Box<Job>>>>>,
    lease: Arc<Mutex<Option<LeaseId>>>,
}

/// A handoff and its inbox, the driver's lease lasting `length`.
pub(crate) fn channel(length: Duration) -> (Arc<Handoff>, Inbox) {
    let (jobs, receiver) = unbounded_channel();
    let lease = Arc::new(Mutex::new(Some(LeaseId::new_at(OffsetDateTime::now_utc()))));
    let handoff = Arc::new(Handoff { jobs, lease: Arc::clone(&lease), length });
    (handoff, Inbox { shared: Arc::new(Mutex::new(Some(receiver))), lease })
}

impl JobHandoff for Handoff {
    fn open_lease(&self) -> Option<OpenLease> {
        let lease = *self.lease.lock().unwrap_or_else(PoisonError::into_inner);
        lease.filter(|_| !self.jobs.is_closed()).map(|id| OpenLease { id, length: self.length })
    }

    fn send(&self, job: Job) -> Result<(), Box<Job>> {
        self.jobs.send(Box::new(job)).map_err(|e| e.0)
    }
}

impl Inbox {
    /// The receiver and the lease handed jobs go under, for the one run that drives the handed
    /// jobs; `None` once taken.
    pub(crate) fn take(&self) -> Option<(UnboundedReceiver<Box<Job>>, LeaseId)> {
        let receiver = self.shared.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        let lease = (*self.lease.lock().unwrap_or_else(PoisonError::into_inner))?;
        Some((receiver, lease))
    }

    /// Hands new jobs over under `lease` from now on: the one they went under ran out.
    pub(crate) fn lease_under(&self, lease: LeaseId) {
        let mut current = self.lease.lock().unwrap_or_else(PoisonError::into_inner);
        if current.is_some() {
            *current = Some(lease);
        }
    }

    /// Stops handing jobs to this driver: submissions accept new ones for any driver.
    pub(crate) fn shut(&self) {
        *self.lease.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}
