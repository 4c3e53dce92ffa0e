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

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]
mod tests {
    use genjobs_domain::catalog::{Catalog, PricePercent, Rate, Unit};
    use genjobs_domain::ids::UserId;
    use genjobs_domain::job::Trigger;
    use genjobs_domain::modality::Modality;
    use genjobs_domain::request::{GenerationDraft, GenerationRequest};
    use time::Duration;

    use super::*;

    fn job(now: OffsetDateTime) -> Job {
        let draft = GenerationDraft { prompt: Some("p".into()), ..GenerationDraft::default() };
        let request = GenerationRequest::validate(Modality::Image, draft, &Catalog::builtin().unwrap()).unwrap();
        let rate =
            Rate { per: Unit::Image, credits: 4, percent: PricePercent::FULL, batch_percent: PricePercent::FULL };
        let id = JobId::new_at(now);
        Job::accept(id, UserId::new_at(now), request.model, Modality::Image, request.input, rate, now).0
    }

    /// A job named next in line while its step runs looks again as the step ends if it still
    /// waits: its look may have come just before the slot freed. One that got its slot keeps
    /// its cadence.
    #[test]
    fn a_job_called_while_advancing_looks_again_when_its_step_leaves_it_waiting() {
        let now = OffsetDateTime::now_utc();
        let later = now + Duration::minutes(1);
        let mut held = Held::default();
        held.keep(job(now), now);
        held.keep(job(now), now);
        let (_, first, _) = held.take_due(now).unwrap();
        let (_, second, _) = held.take_due(now).unwrap();
        held.call(first.id(), now);
        held.call(second.id(), now);
        let still_waiting = first.apply(Trigger::AwaitCapacity { next_poll_at: later }, now).unwrap().into_job();
        let sending = second.apply(Trigger::SubmitStarted { next_poll_at: later }, now).unwrap().into_job();
        assert!(still_waiting.waits_for_capacity() && !sending.waits_for_capacity());
        held.finished_step(first.id(), Some(still_waiting), now);
        held.finished_step(second.id(), Some(sending), now);
        assert_eq!(held.take_due(now).map(|(_, job, _)| job.id()), Some(first.id()), "looks again at once");
        assert!(held.take_due(now).is_none(), "the job sending keeps its own time");
    }
}
