//! Drivers' leases: until when each lives, and the open jobs under it. A renewal is one entry
//! whatever the driver holds; a lease that runs out or ends gives its jobs back to the due index.

use std::collections::{HashMap, HashSet};

use genjobs_domain::ids::{JobId, LeaseId};
use time::OffsetDateTime;

/// One driver's lease: `until` is `None` while it was handed jobs but not started yet.
#[derive(Debug, Default)]
struct Lease {
    until: Option<OffsetDateTime>,
    jobs: HashSet<JobId>,
}

impl Lease {
    fn lives(&self, now: OffsetDateTime) -> bool {
        self.until.is_some_and(|until| until > now)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Leases(HashMap<LeaseId, Lease>);

impl Leases {
    pub(crate) fn lives(&self, lease: LeaseId, now: OffsetDateTime) -> bool {
        self.0.get(&lease).is_some_and(|l| l.lives(now))
    }

    /// Starts a lease never started before; a started one stays as it is, so that a lease that
    /// ran out never lives again.
    pub(crate) fn start(&mut self, lease: LeaseId, until: OffsetDateTime) {
        let entry = self.0.entry(lease).or_default();
        if entry.until.is_none() {
            entry.until = Some(until);
        }
    }

    /// Extends a live lease; the jobs it covers that its driver does not hold (for the caller to
    /// take out and free, those it judges settled), and those of `held` it does not cover.
    /// `None` when the lease does not live.
    pub(crate) fn renew(
        &mut self,
        lease: LeaseId,
        held: &[JobId],
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Option<(Vec<JobId>, Vec<JobId>)> {
        let live = self.0.get_mut(&lease).filter(|l| l.lives(now))?;
        live.until = Some(until);
        let holding: HashSet<&JobId> = held.iter().collect();
        let strays = live.jobs.iter().filter(|id| !holding.contains(id)).copied().collect();
        let not_covered = held.iter().filter(|id| !live.jobs.contains(id)).copied().collect();
        Some((strays, not_covered))
    }

    /// Ends a lease; the jobs it covered.
    pub(crate) fn end(&mut self, lease: LeaseId) -> HashSet<JobId> {
        self.0.remove(&lease).map(|l| l.jobs).unwrap_or_default()
    }

    pub(crate) fn put(&mut self, lease: LeaseId, job: JobId) {
        self.0.entry(lease).or_default().jobs.insert(job);
    }

    pub(crate) fn take_out(&mut self, lease: LeaseId, job: JobId) {
        if let Some(l) = self.0.get_mut(&lease) {
            l.jobs.remove(&job);
        }
    }

    /// Takes the jobs out of every lease that does not live at `now`: they are free again.
    pub(crate) fn run_out(&mut self, now: OffsetDateTime) -> Vec<JobId> {
        self.0.values_mut().filter(|l| !l.lives(now)).flat_map(|l| l.jobs.drain()).collect()
    }

    /// Forgets the leases that ran out before `before`; the jobs they still covered.
    pub(crate) fn forget_older_than(&mut self, before: OffsetDateTime) -> Vec<JobId> {
        let old: Vec<LeaseId> =
            self.0.iter().filter(|(_, l)| l.until.is_some_and(|until| until < before)).map(|(id, _)| *id).collect();
        old.into_iter().flat_map(|id| self.end(id)).collect()
    }
}
