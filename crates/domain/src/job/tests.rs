use super::BatchPlace;
use super::*;
use crate::catalog::{PricePercent, Unit};
use crate::ids::BatchId;
use crate::output::{OutputKind, OutputMeta};

fn now() -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000)
}

fn input() -> GenerationInput {
    GenerationInput {
        prompt: "a cat".into(),
        negative_prompt: None,
        aspect_ratio: "1:1".into(),
        resolution: None,
        duration_sec: None,
        n: Some(2),
        seed: None,
        image_inputs: vec![],
        extra: None,
    }
}

fn upstream() -> UpstreamRef {
    UpstreamRef::new("test", "r1")
}

fn accepted() -> (Job, CreditMovement) {
    Job::accept(
        JobId::new_at(now()),
        UserId::new_at(now()),
        ModelId::new("nano-banana"),
        Modality::Image,
        input(),
        Rate { per: Unit::Image, credits: 4, percent: PricePercent::FULL, batch_percent: PricePercent::FULL },
        now(),
    )
}

fn queued() -> Job {
    accepted().0
}

fn step(job: &Job, trigger: Trigger) -> Job {
    job.apply(trigger, now()).unwrap().into_job()
}

fn submitted() -> Job {
    let attempted = step(&queued(), Trigger::SubmitStarted { next_poll_at: now() });
    step(&attempted, Trigger::Submitted { upstream: upstream(), next_poll_at: now(), billing: None })
}

fn in_state(state: JobState) -> Job {
    let job = submitted();
    match state {
        JobState::Queued => job,
        JobState::Running => step(&job, Trigger::UpstreamRunning { progress: 10, next_poll_at: now() }),
        JobState::Succeeded => step(&job, success(8)),
        JobState::Failed => step(&job, failure()),
        JobState::Canceled => step(&job, Trigger::Cancel),
    }
}

fn image() -> OutputItem {
    OutputItem {
        url: "https://x/1.png".into(),
        kind: OutputKind::Image,
        meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
        copy: None,
    }
}

fn success(actual: u64) -> Trigger {
    Trigger::Succeeded { outputs: vec![image()], credits_actual: Credits::new(actual), reported_units: None }
}

fn failure() -> Trigger {
    Trigger::failed(JobError::new(JobErrorCode::UpstreamFailed, "boom"))
}

fn trigger_of(kind: TriggerKind) -> Trigger {
    match kind {
        TriggerKind::SubmitStarted => Trigger::SubmitStarted { next_poll_at: now() },
        TriggerKind::Admitted => Trigger::Admitted,
        TriggerKind::Submitted => Trigger::Submitted { upstream: upstream(), next_poll_at: now(), billing: None },
        TriggerKind::Moderated => Trigger::Moderated { outcome: Moderation::Passed },
        TriggerKind::ModerationDelayed => Trigger::ModerationDelayed { next_poll_at: now() },
        TriggerKind::ModerationRefused => Trigger::ModerationRefused {
            outcome: Moderation::Flagged,
            error: JobError::new(JobErrorCode::ContentRefused, "flagged"),
        },
        TriggerKind::SubmitNotReached => Trigger::SubmitNotReached { next_poll_at: now() },
        TriggerKind::AwaitCapacity => Trigger::AwaitCapacity { next_poll_at: now() },
        TriggerKind::UpstreamQueued => Trigger::UpstreamQueued { position: Some(2), next_poll_at: now() },
        TriggerKind::UpstreamRunning => Trigger::UpstreamRunning { progress: 50, next_poll_at: now() },
        TriggerKind::UpstreamUnreachable => Trigger::UpstreamUnreachable { next_poll_at: now() },
        TriggerKind::Succeeded => success(4),
        TriggerKind::Failed => failure(),
        TriggerKind::Cancel => Trigger::Cancel,
    }
}

/// A queued batch item, not yet admitted.
fn batch_item() -> Job {
    let place = BatchPlace { batch_id: BatchId::new_at(now()), custom_id: "item-0".into(), admitted: false };
    queued().with_batch(place, now() + time::Duration::days(1))
}

/// A batch item counts against its owner's limit from its admission to its end, and only then;
/// a job submitted on its own counts from its acceptance.
#[test]
fn a_batch_item_counts_from_its_admission_to_its_end() {
    let item = batch_item();
    assert!(!item.counts_as_active() && item.awaits_admission());
    assert_eq!(item.next_poll_at(), Some(now() + time::Duration::days(1)), "it rests until its window closes");
    assert_eq!(item.priority(), crate::capacity::Priority::Low, "batch items run at low priority");
    let canceled_unsent = item.apply(Trigger::Cancel, now()).unwrap();
    assert!(!canceled_unsent.frees_slot() && !canceled_unsent.takes_slot(), "an item never admitted frees nothing");
    let admission = item.apply(Trigger::Admitted, now()).unwrap();
    assert!(admission.takes_slot() && !admission.frees_slot());
    let admitted = admission.into_job();
    assert!(admitted.counts_as_active() && !admitted.awaits_admission());
    assert!(matches!(admitted.apply(Trigger::Admitted, now()), Err(TransitionError::NotApplicable { .. })));
    let ended = admitted.apply(failure(), now()).unwrap();
    assert!(ended.frees_slot() && ended.frees_batch_slot());
    let own = queued().apply(failure(), now()).unwrap();
    assert!(own.frees_slot() && !own.frees_batch_slot());
    assert!(matches!(queued().apply(Trigger::Admitted, now()), Err(TransitionError::NotApplicable { .. })));
}

/// A job in `state` on which the submission guards of `kind` hold, so that only the table decides.
fn ready_for(state: JobState, kind: TriggerKind) -> Job {
    match (state, kind) {
        (
            JobState::Queued,
            TriggerKind::SubmitStarted
            | TriggerKind::AwaitCapacity
            | TriggerKind::Moderated
            | TriggerKind::ModerationDelayed
            | TriggerKind::ModerationRefused,
        ) => queued(),
        (JobState::Queued, TriggerKind::Admitted) => batch_item(),
        (JobState::Queued, TriggerKind::Submitted | TriggerKind::SubmitNotReached) => {
            step(&queued(), Trigger::SubmitStarted { next_poll_at: now() })
        }
        _ => in_state(state),
    }
}

/// The state machine, written out: every (state, trigger) pair and where it leads.
#[test]
fn the_state_table() {
    use JobState::{Canceled, Failed, Queued, Running, Succeeded};
    use TriggerKind as T;
    #[rustfmt::skip]
    let table: [(JobState, [Option<JobState>; 14]); 5] = [
        //        SubmitStarted  Admitted      Moderated     ModDelayed    ModRefused    Submitted     NotReached    AwaitCapacity UpQueued       UpRunning      Unreachable    Succeeded        Failed        Cancel
        (Queued,  [Some(Queued), Some(Queued), Some(Queued), Some(Queued), Some(Failed), Some(Queued), Some(Queued), Some(Queued), Some(Queued),  Some(Running), Some(Queued),  Some(Succeeded), Some(Failed), Some(Canceled)]),
        (Running, [None,         None,         None,         None,         None,         None,         None,         None,         Some(Running), Some(Running), Some(Running), Some(Succeeded), Some(Failed), Some(Canceled)]),
        (Succeeded, [None; 14]),
        (Failed,    [None; 14]),
        (Canceled,  [None; 14]),
    ];
    let columns = [
        T::SubmitStarted,
        T::Admitted,
        T::Moderated,
        T::ModerationDelayed,
        T::ModerationRefused,
        T::Submitted,
        T::SubmitNotReached,
        T::AwaitCapacity,
        T::UpstreamQueued,
        T::UpstreamRunning,
        T::UpstreamUnreachable,
        T::Succeeded,
        T::Failed,
        T::Cancel,
    ];
    assert_eq!(columns, TriggerKind::ALL);
    for (state, row) in table {
        for (kind, expected) in columns.into_iter().zip(row) {
            assert_eq!(next_state(state, kind), expected, "{state:?} {kind:?}");
            let job = ready_for(state, kind);
            let result = job.apply(trigger_of(kind), now());
            match expected {
                None if state.is_final() => assert_eq!(result, Err(TransitionError::AlreadyFinal(state))),
                None => assert!(matches!(result, Err(TransitionError::NotApplicable { .. })), "{state:?} {kind:?}"),
                Some(next) => {
                    let t = result.unwrap_or_else(|e| panic!("{state:?} {kind:?}: {e}"));
                    assert_eq!(t.job().state(), next, "{state:?} {kind:?}");
                    assert_eq!(t.expected_version(), job.version());
                    assert_eq!(t.job().version(), job.version() + 1);
                    assert_eq!(t.frees_slot(), next.is_final());
                    let movement = match next {
                        Succeeded => Some(CreditMovement::Settle { held: Credits::new(8), actual: Credits::new(4) }),
                        Failed | Canceled => Some(CreditMovement::Release(Credits::new(8))),
                        Queued | Running => None,
                    };
                    assert_eq!(t.movement(), movement, "{state:?} {kind:?}");
                }
            }
        }
    }
}

#[test]
fn accepting_holds_the_price() {
    let (job, movement) = accepted();
    assert_eq!(job.state(), JobState::Queued);
    assert_eq!(movement, CreditMovement::Hold(Credits::new(8)));
    assert_eq!((job.started_at(), job.finished_at(), job.credits_actual()), (None, None, None));
    assert_eq!((job.outputs(), job.error()), (None, None));
}

#[test]
fn restore_brings_back_every_state_and_refuses_what_a_phase_cannot_say() {
    for state in JobState::ALL {
        let job = in_state(state);
        assert_eq!(Job::restore(job.to_stored()).as_ref(), Ok(&job), "{state:?} round trip");
    }
    let settled = in_state(JobState::Succeeded).to_stored();
    let JobPhase::Succeeded { upstream, started_at, finished_at, outputs, .. } = settled.phase.clone() else {
        panic!("a succeeded job's phase is Succeeded");
    };
    let overcharged =
        JobPhase::Succeeded { upstream, started_at, finished_at, outputs, credits_actual: Credits::new(9) };
    assert!(Job::restore(StoredJob { phase: overcharged, ..settled.clone() }).is_err(), "a charge above the hold");
    let running = in_state(JobState::Running).to_stored();
    let JobPhase::Running { upstream, started_at, .. } = running.phase.clone() else {
        panic!("a running job's phase is Running");
    };
    let complete = JobPhase::Running { upstream, started_at, progress: 100 };
    assert!(Job::restore(StoredJob { phase: complete, ..running }).is_err(), "100 before success");
    let polled = StoredJob { next_poll_at: Some(now()), ..in_state(JobState::Failed).to_stored() };
    assert!(Job::restore(polled).is_err(), "a final job is never polled");
}

#[test]
fn a_job_in_each_phase_shows_only_the_data_of_its_state() {
    let accepted = queued();
    assert_eq!(accepted.phase(), &JobPhase::Accepted);
    assert!(!accepted.submit_attempted() && accepted.upstream().is_none());
    let sending = step(&accepted, Trigger::SubmitStarted { next_poll_at: now() });
    assert_eq!(sending.phase(), &JobPhase::Sending);
    assert!(sending.submit_attempted() && sending.upstream().is_none());
    let failed = step(&sending, failure());
    let JobPhase::Failed { reached, .. } = failed.phase() else { panic!("failed: {:?}", failed.phase()) };
    assert_eq!(reached.submission, Submission::Attempted, "a failed job remembers it may exist at the provider");
    assert!(failed.submit_attempted() && failed.upstream().is_none() && failed.outputs().is_none());
    let canceled = step(&in_state(JobState::Running), Trigger::Cancel);
    assert_eq!(canceled.upstream(), Some(&upstream()), "a canceled job keeps where it lived at the provider");
    assert_eq!(canceled.progress(), 10, "and its last progress");
    assert_eq!(canceled.finished_at(), canceled.canceled_at());
}

#[test]
fn only_poll_results_are_recomputable_and_only_new_states_wake_waiters() {
    let running = in_state(JobState::Running);
    let progress = running.apply(Trigger::UpstreamRunning { progress: 70, next_poll_at: now() }, now()).unwrap();
    assert!(progress.is_recomputable() && !progress.changes_state());
    let started = submitted().apply(Trigger::UpstreamRunning { progress: 1, next_poll_at: now() }, now()).unwrap();
    assert!(started.is_recomputable() && started.changes_state());
    for trigger in [Trigger::SubmitStarted { next_poll_at: now() }, success(1), failure(), Trigger::Cancel] {
        let base = if matches!(trigger, Trigger::SubmitStarted { .. }) { queued() } else { submitted() };
        assert!(!base.apply(trigger, now()).unwrap().is_recomputable());
    }
    assert!(running.apply(Trigger::Cancel, now()).unwrap().changes_state());
}

#[test]
fn a_poll_that_only_reschedules_changes_nothing_observable() {
    let running = in_state(JobState::Running);
    let later = now() + time::Duration::seconds(2);
    let same = step(&running, Trigger::UpstreamRunning { progress: 10, next_poll_at: later });
    assert!(same.same_observable_state(&running));
    let unreachable = step(&running, Trigger::UpstreamUnreachable { next_poll_at: now() });
    assert!(unreachable.same_observable_state(&running));
    let further = step(&running, Trigger::UpstreamRunning { progress: 11, next_poll_at: now() });
    assert!(!further.same_observable_state(&running));
    assert!(!step(&running, Trigger::Cancel).same_observable_state(&running));
    let kept = running.apply(Trigger::UpstreamRunning { progress: 10, next_poll_at: later }, now()).unwrap();
    let kept = kept.into_unwritten_job();
    assert_eq!((kept.version(), kept.next_poll_at()), (running.version(), Some(later)));
}

#[test]
fn submission_steps_apply_only_before_submission() {
    let job = queued();
    assert!(job.apply(Trigger::Submitted { upstream: upstream(), next_poll_at: now(), billing: None }, now()).is_err());
    let attempted = step(&job, Trigger::SubmitStarted { next_poll_at: now() });
    assert!(attempted.submit_attempted());
    assert!(attempted.apply(Trigger::SubmitStarted { next_poll_at: now() }, now()).is_err(), "never submitted twice");
    let retry = step(&attempted, Trigger::SubmitNotReached { next_poll_at: now() });
    assert!(!retry.submit_attempted());
    assert_eq!(retry.poll_failures(), 1);
    assert!(queued().apply(success(1), now()).is_err(), "no result without submission");
    assert!(queued().apply(Trigger::UpstreamRunning { progress: 1, next_poll_at: now() }, now()).is_err());
}

#[test]
fn progress_never_decreases_and_stays_below_100_until_success() {
    let job = step(&submitted(), Trigger::UpstreamRunning { progress: 60, next_poll_at: now() });
    let lower = step(&job, Trigger::UpstreamRunning { progress: 30, next_poll_at: now() });
    assert_eq!(lower.progress(), 60);
    let over = step(&job, Trigger::UpstreamRunning { progress: 100, next_poll_at: now() });
    assert_eq!(over.progress(), MAX_RUNNING_PROGRESS);
    assert_eq!(step(&job, success(8)).progress(), 100);
}

#[test]
fn success_charges_at_most_the_hold() {
    let t = submitted().apply(success(50), now()).unwrap();
    assert_eq!(t.job().credits_actual(), Some(Credits::new(8)));
    assert_eq!(t.movement(), Some(CreditMovement::Settle { held: Credits::new(8), actual: Credits::new(8) }));
    assert!(t.job().outputs().is_some());
    assert_eq!(t.job().error(), None);
    assert_eq!(t.job().finished_at(), Some(now()));
    assert_eq!(t.job().next_poll_at(), None);
}

#[test]
fn cancel_sets_canceled_at_equal_to_finished_at_and_releases() {
    let t = in_state(JobState::Running).apply(Trigger::Cancel, now()).unwrap();
    let job = t.job();
    assert_eq!(job.canceled_at(), Some(now()));
    assert_eq!(job.finished_at(), job.canceled_at());
    assert_eq!(job.credits_actual(), Some(Credits::ZERO));
    assert_eq!(job.error().unwrap().code, JobErrorCode::JobCanceled);
    assert_eq!(job.error().unwrap().error_type(), "canceled");
    assert_eq!(job.outputs(), None);
}

#[test]
fn failure_releases_and_records_the_error() {
    let t = queued().apply(failure(), now()).unwrap();
    assert_eq!(t.job().error().unwrap().error_type(), "upstream_error");
    assert_eq!(t.job().credits_actual(), Some(Credits::ZERO));
    assert_eq!(t.movement(), Some(CreditMovement::Release(Credits::new(8))));
}

#[test]
fn names_round_trip() {
    for state in JobState::ALL {
        assert_eq!(JobState::parse(state.as_str()), Some(state));
    }
    for code in JobErrorCode::ALL {
        assert_eq!(JobErrorCode::parse(code.as_str()), Some(code));
    }
}

#[test]
fn a_job_waits_for_capacity_unsent_and_is_sent_from_there() {
    let waiting = step(&queued(), Trigger::AwaitCapacity { next_poll_at: now() });
    assert!(waiting.waits_for_capacity() && !waiting.submit_attempted());
    assert_eq!(waiting.state(), JobState::Queued);
    let handed = step(&queued(), Trigger::SubmitStarted { next_poll_at: now() });
    assert!(
        step(&handed, Trigger::AwaitCapacity { next_poll_at: now() }).waits_for_capacity(),
        "a handed job found no slot"
    );
    let again = waiting.apply(Trigger::AwaitCapacity { next_poll_at: now() }, now()).unwrap();
    assert!(again.is_recomputable() && again.job().same_observable_state(&waiting), "waiting on costs no write");
    let sending = step(&waiting, Trigger::SubmitStarted { next_poll_at: now() });
    assert!(sending.submit_attempted() && !sending.waits_for_capacity());
    assert!(
        sending.apply(Trigger::Submitted { upstream: upstream(), next_poll_at: now(), billing: None }, now()).is_ok()
    );
    let canceled = step(&waiting, Trigger::Cancel);
    assert!(!canceled.submit_attempted(), "a waiting job never reached the provider");
}

#[test]
fn a_job_yet_to_start_is_looked_at_by_its_start_deadline_and_one_that_started_is_not() {
    let start_by = now() + time::Duration::seconds(5);
    let later = now() + time::Duration::minutes(10);
    let job = queued().with_start_by(Some(start_by));
    let waiting = step(&job, Trigger::AwaitCapacity { next_poll_at: later });
    assert_eq!(waiting.next_poll_at(), Some(start_by), "a waiting job rests no later than its deadline");
    assert!(!waiting.missed_its_start(start_by - time::Duration::milliseconds(1)));
    assert!(waiting.missed_its_start(start_by), "missed at its deadline");
    let sending = step(&waiting, Trigger::SubmitStarted { next_poll_at: later });
    assert_eq!(sending.next_poll_at(), Some(later), "a send in flight keeps its own mark");
    assert!(!sending.missed_its_start(later), "a send in flight is judged once it is recorded");
    let at_provider = step(&sending, Trigger::Submitted { upstream: upstream(), next_poll_at: later, billing: None });
    assert_eq!(at_provider.next_poll_at(), Some(start_by), "queued at the provider, looked at by its deadline");
    assert!(at_provider.missed_its_start(later));
    let running = step(&at_provider, Trigger::UpstreamRunning { progress: 1, next_poll_at: later });
    assert_eq!(running.next_poll_at(), Some(later), "a running job keeps its schedule");
    assert!(!running.missed_its_start(later), "a job that started is past its start deadline's reach");
    let unbounded = step(&queued(), Trigger::AwaitCapacity { next_poll_at: later });
    assert!(unbounded.next_poll_at() == Some(later) && !unbounded.missed_its_start(later), "no deadline, none");
}

#[test]
fn a_job_sent_on_a_costed_route_is_billed_at_its_end() {
    use crate::catalog::{Cost, CostUnit};
    let billing = Billing { cost: Cost { per: CostUnit::Image, usd: "0.05".parse().unwrap() }, key_hint: None };
    let attempted = step(&queued(), Trigger::SubmitStarted { next_poll_at: now() });
    let sent =
        step(&attempted, Trigger::Submitted { upstream: upstream(), next_poll_at: now(), billing: Some(billing) });
    assert_eq!(sent.provider_bill(), None, "no bill before the end");
    let delivered = sent.rate().delivered(sent.input(), &[image()], sent.credits_held());
    assert_eq!(delivered, Credits::new(4), "one image of the two asked for is charged as one");
    let done =
        step(&sent, Trigger::Succeeded { outputs: vec![image()], credits_actual: delivered, reported_units: None });
    let bill = done.provider_bill().map(|b| (b.units.to_string(), b.units_charged, b.cost_usd.to_string()));
    assert_eq!(bill, Some(("1".into(), Some(crate::decimal::Decimal::whole(1)), "0.05".into())));
    let reported = step(
        &sent,
        Trigger::Succeeded {
            outputs: vec![image()],
            credits_actual: delivered,
            reported_units: Some(crate::decimal::Decimal::whole(2)),
        },
    );
    assert_eq!(
        reported.provider_bill().map(|b| b.cost_usd.to_string()),
        Some("0.1".into()),
        "the provider's report first"
    );
    let canceled = step(&sent, Trigger::Cancel);
    assert_eq!(canceled.provider_bill().map(|b| b.cost_usd), Some(crate::decimal::Decimal::ZERO));
    assert_eq!(step(&submitted(), Trigger::Cancel).provider_bill(), None, "no cost, no bill");
}

#[test]
fn a_failed_job_keeps_the_units_its_provider_billed_and_releases_the_whole_hold() {
    use crate::catalog::{Cost, CostUnit};
    use crate::decimal::Decimal;
    let billing = Billing { cost: Cost { per: CostUnit::Image, usd: "0.05".parse().unwrap() }, key_hint: None };
    let attempted = step(&queued(), Trigger::SubmitStarted { next_poll_at: now() });
    let sent =
        step(&attempted, Trigger::Submitted { upstream: upstream(), next_poll_at: now(), billing: Some(billing) });
    let error = JobError::new(JobErrorCode::UpstreamFailed, "ran, then crashed");
    let transition = sent.apply(Trigger::Failed { error, reported_units: Some(Decimal::whole(3)) }, now()).unwrap();
    assert_eq!(transition.movement(), Some(CreditMovement::Release(sent.credits_held())), "the user pays nothing");
    let failed = transition.job();
    assert_eq!(failed.credits_actual(), Some(Credits::ZERO));
    let bill = failed.provider_bill().map(|b| (b.units, b.units_charged, b.cost_usd.to_string()));
    assert_eq!(bill, Some((Decimal::whole(3), Some(Decimal::ZERO), "0.15".into())), "billed, though nothing charged");
    let unreported = step(&sent, failure());
    assert_eq!(unreported.provider_bill().map(|b| b.units), Some(Decimal::ZERO), "0 units unless reported");
}

#[test]
fn a_check_is_kept_and_a_refusal_before_sending_names_the_moderation_outcome() {
    let checked = step(&queued(), Trigger::Moderated { outcome: Moderation::Passed });
    assert_eq!(checked.moderation(), Some(Moderation::Passed));
    let sending = step(&checked, Trigger::SubmitStarted { next_poll_at: now() });
    assert_eq!(Job::restore(sending.to_stored()).map(|job| job.moderation()), Ok(Some(Moderation::Passed)));
    let handed = step(&queued(), Trigger::SubmitStarted { next_poll_at: now() });
    for (outcome, code) in [
        (Moderation::Flagged, JobErrorCode::ContentRefused),
        (Moderation::Unavailable, JobErrorCode::ModerationUnavailable),
    ] {
        let refused = Trigger::ModerationRefused { outcome, error: JobError::new(code, "no") };
        let t = handed.apply(refused, now()).unwrap();
        assert_eq!((t.job().moderation(), t.job().state()), (Some(outcome), JobState::Failed));
        assert_eq!(t.movement(), Some(CreditMovement::Release(Credits::new(8))));
    }
    // A provider's own refusal, after the check passed, leaves the check as it was.
    let refused = Trigger::failed(JobError::new(JobErrorCode::ContentRefused, "no"));
    assert_eq!(step(&sending, refused).moderation(), Some(Moderation::Passed));
}

#[test]
fn a_delayed_check_takes_a_handed_job_back_to_unsent() {
    let handed = step(&queued(), Trigger::SubmitStarted { next_poll_at: now() });
    let delayed = step(&handed, Trigger::ModerationDelayed { next_poll_at: now() });
    assert_eq!(delayed.phase(), &JobPhase::Accepted);
    assert!(!delayed.submit_attempted());
    assert_eq!(delayed.poll_failures(), 1);
}
