//! The driver's steps: submitting once, polling, settling, timing out, letting go.

use genjobs_domain::batch::Batch;
use genjobs_domain::ids::BatchId;
use genjobs_domain::job::BatchPlace;

use super::*;

#[tokio::test]
async fn driver_submits_a_queued_job_once_recording_the_attempt_first() {
    let mut mocks = Mocks::new();
    let mut seq = mockall::Sequence::new();
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().submit_attempted() && t.job().upstream().is_none())
        .times(1)
        .in_sequence(&mut seq)
        .returning(applied);
    mocks
        .upstream
        .expect_submit_placed()
        .withf(|_, model, input, _| model.id.as_str() == "nano-banana" && input.n == Some(3))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _, _| Ok(upstream_ref()));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().upstream() == Some(&upstream_ref()))
        .times(1)
        .in_sequence(&mut seq)
        .returning(applied);
    mocks.events.expect_publish().times(0);
    advance(mocks.steps(), job()).await;
}

/// One step, as a driver that holds the job takes it; a step that asks to wait fails the test.
async fn advance(steps: JobSteps, job: Job) -> Option<Job> {
    match steps.advance(job).await {
        Stepped::Done(kept) => kept,
        Stepped::Unrecorded(unrecorded) => panic!("the step asks to record its submission again: {unrecorded:?}"),
    }
}

#[tokio::test]
async fn a_submission_is_recorded_through_a_store_outage_and_never_sent_twice() {
    let mut mocks = Mocks::new();
    let mut seq = mockall::Sequence::new();
    mocks.jobs.expect_commit().times(1).in_sequence(&mut seq).returning(applied);
    mocks.upstream.expect_submit_placed().times(1).in_sequence(&mut seq).returning(|_, _, _, _| Ok(upstream_ref()));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().upstream() == Some(&upstream_ref()))
        .times(2)
        .in_sequence(&mut seq)
        .returning(|_| Err(StoreError::Unavailable("database restarting".into())));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().upstream() == Some(&upstream_ref()))
        .times(1)
        .in_sequence(&mut seq)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    let steps = mocks.steps();
    let poll_interval = steps.settings().poll_interval;
    let Stepped::Unrecorded(first) = steps.advance(job()).await else { panic!("the outage asks for a retry") };
    assert_eq!(first.retry_in(), poll_interval * 2);
    let Stepped::Unrecorded(second) = steps.record_submission(first).await else { panic!("still out") };
    assert_eq!(second.retry_in(), poll_interval * 4, "the pause doubles");
    let Stepped::Done(Some(kept)) = steps.record_submission(second).await else {
        panic!("the driver keeps holding the job")
    };
    assert_eq!(kept.upstream(), Some(&upstream_ref()), "the provider's reference survived the outage");
}

#[tokio::test]
async fn driver_never_resubmits_after_an_ambiguous_or_interrupted_submission() {
    let mut mocks = Mocks::new();
    mocks
        .upstream
        .expect_submit_placed()
        .times(1)
        .returning(|_, _, _, _| Err(SubmitFailure::Ambiguous("timeout".into())));
    mocks.jobs.expect_commit().withf(|t| !t.job().state().is_final()).times(1).returning(applied);
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().error().as_ref().is_some_and(|e| e.code == JobErrorCode::UpstreamFailed))
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    advance(mocks.steps(), job()).await;

    let mut mocks = Mocks::new();
    let interrupted = job().apply(Trigger::SubmitStarted { next_poll_at: t0() }, t0()).unwrap().into_job();
    mocks.upstream.expect_submit_placed().times(0);
    mocks
        .jobs
        .expect_commit()
        .withf(|t| {
            t.job().state() == JobState::Failed && t.movement() == Some(CreditMovement::Release(Credits::new(12)))
        })
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    advance(mocks.steps(), interrupted).await;
}

#[tokio::test]
async fn driver_retries_a_submission_that_never_reached_the_provider() {
    let mut mocks = Mocks::new();
    mocks
        .upstream
        .expect_submit_placed()
        .times(1)
        .returning(|_, _, _, _| Err(SubmitFailure::NotReached("refused".into())));
    mocks.jobs.expect_commit().withf(|t| t.job().submit_attempted()).times(1).returning(applied);
    mocks
        .jobs
        .expect_commit()
        .withf(|t| !t.job().submit_attempted() && t.job().state() == JobState::Queued && t.job().poll_failures() == 1)
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    advance(mocks.steps(), job()).await;
}

#[tokio::test]
async fn driver_times_out_a_job_and_asks_the_provider_to_stop_it() {
    let mut mocks = Mocks::new();
    mocks.clock = MockClock::new();
    mocks.clock.expect_now().returning(|| t0() + time::Duration::hours(1));
    mocks.upstream.expect_status().times(0);
    mocks
        .upstream
        .expect_cancel_unless_done()
        .withf(|_, upstream| *upstream == upstream_ref())
        .times(1)
        .returning(|_, _| Ok(genjobs_domain::ports::CancelOutcome::Requested));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().error().as_ref().is_some_and(|e| e.code == JobErrorCode::UpstreamTimeout))
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    advance(mocks.steps(), submitted_job()).await;
}

#[tokio::test]
async fn driver_settles_a_completed_job_at_the_delivered_price() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
    let two_images = (0..2)
        .map(|i| OutputItem {
            url: format!("https://cdn/{i}.png"),
            kind: OutputKind::Image,
            meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
            copy: None,
        })
        .collect::<Vec<_>>();
    mocks.upstream.expect_result().return_once(move |_, _, _| Ok(two_images.into()));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.movement() == Some(CreditMovement::Settle { held: Credits::new(12), actual: Credits::new(8) }))
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().times(1).returning(|_| ());
    advance(mocks.steps(), submitted_job()).await;
}

#[tokio::test]
async fn driver_maps_result_failures_to_error_codes() {
    for (failure, code) in [
        (ResultFailure::Rejected("nsfw".into()), JobErrorCode::UpstreamRejected),
        (ResultFailure::Failed("crash".into()), JobErrorCode::UpstreamFailed),
        (ResultFailure::Invalid("shape".into()), JobErrorCode::OutputInvalid),
    ] {
        let mut mocks = Mocks::new();
        mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
        mocks.upstream.expect_result().return_once(move |_, _, _| Err(failure));
        mocks
            .jobs
            .expect_commit()
            .withf(move |t| {
                t.job().error().as_ref().is_some_and(|e| e.code == code)
                    && t.job().credits_actual() == Some(Credits::ZERO)
            })
            .times(1)
            .returning(applied);
        mocks.events.expect_publish().returning(|_| ());
        advance(mocks.steps(), submitted_job()).await;
    }
}

#[tokio::test]
async fn driver_backs_off_on_transient_poll_failures_without_writing() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Err(PollFailure::Transient("503".into())));
    mocks.jobs.expect_commit().times(0);
    let kept = advance(mocks.steps(), submitted_job()).await.unwrap();
    assert_eq!((kept.poll_failures(), kept.next_poll_at()), (1, Some(t0() + time::Duration::seconds(4))));
}

#[tokio::test]
async fn driver_discards_a_late_result_when_the_job_changed_meanwhile() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
    mocks.upstream.expect_result().returning(|_, _, _| Ok(one_image().into()));
    let canceled = submitted_job().apply(Trigger::Cancel, t0()).unwrap().into_job();
    mocks.jobs.expect_commit().times(1).return_once(move |_| Ok(Commit::Stale(canceled)));
    mocks.events.expect_publish().times(0);
    advance(mocks.steps(), submitted_job()).await;
}

#[tokio::test]
async fn driver_estimates_progress_when_the_provider_gives_none() {
    let mut mocks = Mocks::new();
    let started =
        submitted_job().apply(Trigger::UpstreamRunning { progress: 0, next_poll_at: t0() }, t0()).unwrap().into_job();
    mocks.clock = MockClock::new();
    mocks.clock.expect_now().returning(|| t0() + time::Duration::seconds(4));
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Running { percent: None }));
    mocks.jobs.expect_commit().withf(|t| t.job().progress() == 50 && t.is_recomputable()).times(1).returning(applied);
    mocks.events.expect_publish().times(0);
    advance(mocks.steps(), started).await;
}

#[tokio::test]
async fn driver_wakes_waiters_when_a_job_starts_running() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Running { percent: Some(5) }));
    mocks.jobs.expect_commit().withf(|t| t.job().state() == JobState::Running).times(1).returning(applied);
    mocks.events.expect_publish().times(1).returning(|_| ());
    advance(mocks.steps(), submitted_job()).await;
}

#[tokio::test]
async fn driver_keeps_the_cadence_of_the_due_time_not_of_the_answer() {
    let mut mocks = Mocks::new();
    mocks.clock = MockClock::new();
    mocks.clock.expect_now().returning(|| t0() + time::Duration::milliseconds(700));
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Queued { position: None }));
    let kept = advance(mocks.steps(), submitted_job()).await.unwrap();
    assert_eq!(kept.next_poll_at(), Some(t0() + time::Duration::seconds(2)));
}

#[tokio::test]
async fn driver_writes_nothing_for_a_poll_that_changes_nothing_visible() {
    let mut mocks = Mocks::new();
    let running =
        submitted_job().apply(Trigger::UpstreamRunning { progress: 40, next_poll_at: t0() }, t0()).unwrap().into_job();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Running { percent: Some(40) }));
    mocks.jobs.expect_commit().times(0);
    mocks.events.expect_publish().times(0);
    let kept = advance(mocks.steps(), running.clone()).await.unwrap();
    assert_eq!(kept.version(), running.version(), "nothing was written, so the version stays");
    assert_eq!(kept.next_poll_at(), Some(t0() + time::Duration::seconds(2)));
}

#[tokio::test]
async fn driver_lets_go_of_a_job_once_it_is_final() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
    mocks.upstream.expect_result().returning(|_, _, _| Ok(one_image().into()));
    mocks.jobs.expect_commit().returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    assert_eq!(advance(mocks.steps(), submitted_job()).await, None);
}

#[tokio::test]
async fn a_job_with_no_free_slot_waits_unsent_and_costs_no_write_while_it_waits() {
    let mut mocks = Mocks::new();
    mocks.upstream = MockUpstreamProvider::new();
    mocks.upstream.expect_reserve().times(2).returning(|_, _| Capacity::Full);
    mocks.upstream.expect_submit_placed().times(0);
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().waits_for_capacity() && !t.job().submit_attempted())
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    let steps = mocks.steps();
    let lease = steps.settings().lease;
    let waiting = advance(steps.clone(), job()).await.expect("the driver keeps the waiting job");
    assert!(waiting.waits_for_capacity());
    assert_eq!(waiting.next_poll_at(), Some(t0() + lease), "it looks again a lease later unless a slot frees");
    let still = advance(steps, waiting).await.expect("still held");
    assert!(still.waits_for_capacity(), "a second look that finds no slot writes nothing");
}

/// A batch item at its owner's limit is parked only as the driver stepped it: admitted (and sent)
/// by another driver holding it too meanwhile, the store's job is let go, never parked back to
/// be sent a second time.
#[tokio::test]
async fn a_batch_item_admitted_elsewhere_meanwhile_is_let_go_not_parked() {
    let mut mocks = Mocks::new();
    let batch = Batch {
        id: BatchId::new_at(t0()),
        user_id: owner(),
        key_prefix: None,
        created_at: t0(),
        expires_at: t0() + time::Duration::days(1),
        webhook_url: None,
        metadata: std::collections::BTreeMap::new(),
        ended: None,
    };
    let place = BatchPlace { batch_id: batch.id, custom_id: "item-0".into(), admitted: false };
    let item = job().with_batch(place, batch.expires_at);
    mocks.batches.expect_batch_record().returning(move |_| Ok(Some(batch.clone())));
    let admitted = item.apply(Trigger::Admitted, t0()).unwrap().into_job();
    let sending = admitted.apply(Trigger::SubmitStarted { next_poll_at: t0() }, t0()).unwrap().into_job();
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.takes_slot())
        .times(1)
        .return_once(move |_| Ok(Commit::OwnerAtLimit(sending)));
    mocks.upstream.expect_submit_placed().times(0);
    assert_eq!(advance(mocks.steps(), item).await, None, "no other commit, no send");
}
