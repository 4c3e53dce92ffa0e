//! The jobs a driver holds in memory, with their schedule: polls come from here, not from the
//! database, while the driver's lease lives.

use std::collections::{BTreeSet, HashMap, HashSet};

use time::OffsetDateTime;

use genjobs_domain::ids::JobId;
use genjobs_domain::job::Job;

/// The jobs a driver holds, by id and by next poll time, those being advanced right now, and
/// those handed over by this process's submissions and not sent yet.
#[derive(Default)]
pub(super) struct Held {
    pub(super) jobs: HashMap<JobId, (OffsetDateTime, Job)>,
    schedule: BTreeSet<(OffsetDateTime, JobId)>,
    advancing: HashSet<JobId>,
    lost: HashSet<JobId>,
    handed: HashSet<JobId>,
    /// Jobs being advanced when a free slot went to them: should the step end with the job still
    /// waiting (it looked just before the slot freed), it looks again at once.
    called: HashSet<JobId>,
}

impl Held {
    /// Holds a job, in place of the copy already held if any (a job freed by a renewal while
    /// it was being handed over may be claimed again), so that it has one place in the schedule.
    pub(super) fn keep(&mut self, job: Job, now: OffsetDateTime) {
        let (id, due) = (job.id(), job.next_poll_at().unwrap_or(now));
        if let Some((before, _)) = self.jobs.insert(id, (due, job)) {
            self.schedule.remove(&(before, id));
        }
        self.schedule.insert((due, id));
    }

    /// A job just accepted by this process, to be sent now: its next poll time, as stored, is
    /// only the lease's end, after which another driver would find it interrupted.
    pub(super) fn keep_handed(&mut self, job: Job, now: OffsetDateTime) {
        self.handed.insert(job.id());
        self.schedule.insert((now, job.id()));
        self.jobs.insert(job.id(), (now, job));
    }

    /// The first job whose time has come, with the time it was due and whether it was handed
    /// over and not sent yet.
    pub(super) fn take_due(&mut self, now: OffsetDateTime) -> Option<(OffsetDateTime, Job, bool)> {
        let first = *self.schedule.first()?;
        if first.0 > now {
            return None;
        }
        self.schedule.remove(&first);
        self.advancing.insert(first.1);
        let handed = self.handed.remove(&first.1);
        self.jobs.remove(&first.1).map(|(due, job)| (due, job, handed))
    }

    /// Lets go of the handed jobs not sent yet, for the driver to withdraw as it stops.
    pub(super) fn take_unsent(&mut self) -> Vec<Job> {
        let unsent: Vec<JobId> = self.handed.drain().collect();
        unsent
            .into_iter()
            .filter_map(|id| {
                let (due, job) = self.jobs.remove(&id)?;
                self.schedule.remove(&(due, id));
                Some(job)
            })
            .collect()
    }

    /// Brings a held job's next poll forward to `at` when it was due later.
    pub(super) fn hurry(&mut self, id: JobId, at: OffsetDateTime) {
        if let Some((due, _)) = self.jobs.get(&id)
            && *due > at
        {
            self.schedule.remove(&(*due, id));
            self.schedule.insert((at, id));
            if let Some(entry) = self.jobs.get_mut(&id) {
                entry.0 = at;
            }
        }
    }

    /// Brings forward to `at` a held job that a free slot goes to, or, when it is being advanced,
    /// to the end of its step should that leave it waiting.
    pub(super) fn call(&mut self, id: JobId, at: OffsetDateTime) {
        if self.advancing.contains(&id) {
            self.called.insert(id);
        } else {
            self.hurry(id, at);
        }
    }

    /// Whether the job is held, being advanced or not.
    pub(super) fn holds(&self, id: JobId) -> bool {
        self.jobs.contains_key(&id) || self.advancing.contains(&id)
    }

    pub(super) fn all_ids(&self) -> Vec<JobId> {
        self.jobs.keys().chain(&self.advancing).copied().collect()
    }

    /// How many jobs are held, those being advanced included.
    pub(super) fn count(&self) -> usize {
        self.jobs.len() + self.advancing.len()
    }

    pub(super) fn next_due(&self) -> Option<OffsetDateTime> {
        self.schedule.first().map(|(at, _)| *at)
    }

    /// Lets go of every job: the lease they were under ran out, so other drivers may have taken
    /// them. A job being advanced is let go when its step ends.
    pub(super) fn let_go_all(&mut self) {
        self.lost.extend(self.advancing.iter().copied());
        self.jobs.clear();
        self.schedule.clear();
        self.handed.clear();
        self.called.clear();
    }

    /// Lets go of a job that became final elsewhere or is no longer under this driver's lease;
    /// one being advanced is let go when its step ends, since a poll that changes nothing hands it
    /// back unwritten.
    pub(super) fn forget(&mut self, id: JobId) {
        if self.advancing.contains(&id) {
            self.lost.insert(id);
        }
        self.handed.remove(&id);
        self.called.remove(&id);
        if let Some((due, _)) = self.jobs.remove(&id) {
            self.schedule.remove(&(due, id));
        }
    }

    pub(super) fn finished_step(&mut self, id: JobId, kept: Option<Job>, now: OffsetDateTime) {
        self.advancing.remove(&id);
        let lost = self.lost.remove(&id);
        let called = self.called.remove(&id);
        if let (Some(job), false) = (kept, lost) {
            let waits = job.waits_for_capacity();
            self.keep(job, now);
            if called && waits {
                self.hurry(id, now);
            }
        }
    }
}
