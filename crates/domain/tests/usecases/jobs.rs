//! Reading, waiting on and canceling a job.

use super::*;

#[tokio::test]
async fn another_users_job_is_forbidden_and_a_missing_one_not_found() {
    let mut mocks = Mocks::new();
    let theirs = Job::restore(StoredJob { user_id: UserId::from_uuid(uuid_of(2)), ..job().to_stored() }).unwrap();
    let (theirs_id, missing) = (theirs.id(), JobId::from_uuid(uuid_of(3)));
    mocks.jobs.expect_job().with(eq(theirs_id)).returning(move |_| Ok(Some(theirs.clone())));
    mocks.jobs.expect_job().with(eq(missing)).returning(|_| Ok(None));
    mocks.jobs.expect_commit().times(0);
    let services = mocks.services(Settings::default());
    assert_eq!(services.reads.job(&caller(), theirs_id).await, Err(JobQueryError::Forbidden));
    assert_eq!(services.cancellations.cancel(&caller(), theirs_id).await, Err(JobQueryError::Forbidden));
    assert_eq!(services.reads.job(&caller(), missing).await, Err(JobQueryError::NotFound));
}

#[tokio::test]
async fn canceling_a_final_job_commits_nothing() {
    let mut mocks = Mocks::new();
    let done = submitted_job()
        .apply(Trigger::Succeeded { outputs: vec![], credits_actual: Credits::new(4), reported_units: None }, t0())
        .unwrap()
        .into_job();
    let id = done.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(done.clone())));
    mocks.jobs.expect_commit().times(0);
    let receipt = mocks.services(Settings::default()).cancellations.cancel(&caller(), id).await.unwrap();
    assert_eq!((receipt.state, receipt.canceled_at), (JobState::Succeeded, t0()));
}

#[tokio::test]
async fn cancel_retries_on_a_stale_version_releases_once_and_wakes_waiters() {
    let mut mocks = Mocks::new();
    let running = submitted_job();
    let id = running.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(running.clone())));
    let mut seq = mockall::Sequence::new();
    mocks.jobs.expect_commit().times(1).in_sequence(&mut seq).returning(|t| Ok(Commit::Stale(t.into_job())));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.movement() == Some(CreditMovement::Release(Credits::new(12))))
        .times(1)
        .in_sequence(&mut seq)
        .returning(applied);
    mocks.events.expect_publish().with(eq(id)).times(1).returning(|_| ());
    mocks.upstream.expect_cancel().times(0);
    let receipt = mocks.services(Settings::default()).cancellations.cancel(&caller(), id).await.unwrap();
    assert_eq!(receipt.state, JobState::Canceled);
}

#[tokio::test]
async fn a_job_that_ends_wakes_the_webhook_dispatcher_only_when_its_client_gave_a_url() {
    for (url, announcements) in [(Some("https://hooks.example.com/done"), 1), (None, 0)] {
        let mut mocks = Mocks::new();
        let running = submitted_job().with_webhook_url(url.map(str::to_owned));
        let id = running.id();
        mocks.jobs.expect_job().returning(move |_| Ok(Some(running.clone())));
        mocks.jobs.expect_commit().returning(applied);
        mocks.events.expect_publish().returning(|_| ());
        mocks.events.expect_announce_webhook().times(announcements).returning(|| ());
        mocks.services(Settings::default()).cancellations.cancel(&caller(), id).await.unwrap();
    }
}

#[tokio::test]
async fn cancel_asks_the_provider_to_stop_only_when_configured() {
    let mut mocks = Mocks::new();
    let running = submitted_job();
    let id = running.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(running.clone())));
    mocks.jobs.expect_commit().returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    mocks.upstream.expect_cancel().withf(|_, u| u.key() == "r").times(1).returning(|_, _| Ok(()));
    let settings = Settings { upstream_cancel: true, ..Settings::default() };
    assert!(mocks.services(settings).cancellations.cancel(&caller(), id).await.is_ok());
}

#[tokio::test]
async fn a_long_poll_waits_for_a_change_and_answers_once_the_job_is_final() {
    let mut mocks = Mocks::new();
    mocks.events = MockJobEvents::new();
    mocks.events.expect_subscribe().times(1).returning(|_| stream::iter([()]).chain(stream::pending()).boxed());
    let running = submitted_job();
    let id = running.id();
    let done = running.apply(Trigger::Cancel, t0()).unwrap().into_job();
    let mut seq = mockall::Sequence::new();
    mocks.jobs.expect_job().times(1).in_sequence(&mut seq).returning(move |_| Ok(Some(running.clone())));
    mocks.jobs.expect_job().times(1).in_sequence(&mut seq).returning(move |_| Ok(Some(done.clone())));
    mocks.clock = MockClock::new();
    mocks.clock.expect_now().returning(t0);
    let poll_interval = Settings::default().poll_interval;
    let mut poll = mocks.services(Settings::default()).reads.long_poll(&caller(), id, Duration::from_secs(30));
    assert_eq!(poll.look().await.unwrap(), Watch::Wait(poll_interval), "waits at most a poll interval");
    assert_eq!(poll.changes().next().await, Some(()));
    let Watch::Answer(job) = poll.look().await.unwrap() else { panic!("a final job is answered at once") };
    assert_eq!(job.state(), JobState::Canceled);
}

#[tokio::test]
async fn a_long_poll_answers_with_the_job_as_it_is_once_the_wait_has_passed() {
    let mut mocks = Mocks::new();
    let running = submitted_job();
    let id = running.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(running.clone())));
    let mut poll = mocks.services(Settings::default()).reads.long_poll(&caller(), id, Duration::ZERO);
    assert!(matches!(poll.look().await.unwrap(), Watch::Answer(job) if !job.state().is_final()));
}

#[tokio::test]
async fn a_stream_of_a_final_job_is_its_final_event_alone() {
    let mut mocks = Mocks::new();
    let failed = job()
        .apply(Trigger::failed(genjobs_domain::job::JobError::new(JobErrorCode::UpstreamFailed, "x")), t0())
        .unwrap()
        .into_job();
    let id = failed.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(failed.clone())));
    let mut events = mocks.services(Settings::default()).reads.job_events(&caller(), id).await.unwrap();
    assert!(
        matches!(events.look().await, Some(Watch::Answer(JobEvent::Error(job))) if job.state() == JobState::Failed)
    );
    assert_eq!(events.look().await, None);
}

#[tokio::test]
async fn a_stream_shows_progress_at_each_tick_and_ends_with_the_final_event() {
    let mut mocks = Mocks::new();
    let running = submitted_job();
    let id = running.id();
    let done = running.apply(Trigger::Cancel, t0()).unwrap().into_job();
    let mut seq = mockall::Sequence::new();
    let first = running.clone();
    mocks.jobs.expect_job().times(2).in_sequence(&mut seq).returning(move |_| Ok(Some(first.clone())));
    mocks.jobs.expect_job().times(1).in_sequence(&mut seq).returning(move |_| Ok(Some(done.clone())));
    let poll_interval = Settings::default().poll_interval;
    let mut events = mocks.services(Settings::default()).reads.job_events(&caller(), id).await.unwrap();
    assert!(matches!(events.look().await, Some(Watch::Answer(JobEvent::Progress(_)))));
    assert_eq!(events.look().await, Some(Watch::Wait(poll_interval)), "the next tick is a poll interval away");
    events.woken(Woke::TimePassed);
    assert!(matches!(events.look().await, Some(Watch::Answer(JobEvent::Progress(_)))), "a tick shows progress");
    events.woken(Woke::Changed);
    assert!(
        matches!(events.look().await, Some(Watch::Answer(JobEvent::Error(job))) if job.state() == JobState::Canceled)
    );
    assert_eq!(events.look().await, None, "the final event ends the stream");
}
