//! Retried copies: a transient failure is tried again with the domain's back-off until its tries
//! are spent; a permanent one and a success are not.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use genjobs_domain::ids::JobId;
use genjobs_domain::output::StoredFile;
use genjobs_domain::ports::{COPY_ATTEMPTS, CopyFailure, MockClock, MockOutputStore, OutputStore};
use genjobs_runtime::RetriedCopies;
use time::OffsetDateTime;

fn pausing_clock(pauses: &Arc<Mutex<Vec<Duration>>>) -> Arc<MockClock> {
    let mut clock = MockClock::new();
    let seen = Arc::clone(pauses);
    clock.expect_sleep().returning(move |pause| seen.lock().unwrap().push(pause));
    Arc::new(clock)
}

fn file() -> StoredFile {
    StoredFile { size: 9, content_type: "image/png".into(), sha256: "00".repeat(32) }
}

async fn copy(store: MockOutputStore, pauses: &Arc<Mutex<Vec<Duration>>>) -> Result<StoredFile, CopyFailure> {
    let retried = RetriedCopies::new(Arc::new(store), pausing_clock(pauses));
    retried.copy(JobId::new_at(OffsetDateTime::UNIX_EPOCH), 0, "https://cdn/a.png", "image/png").await
}

#[tokio::test]
async fn a_copy_failing_transiently_is_tried_three_times_with_back_off() {
    let mut store = MockOutputStore::new();
    store.expect_copy().times(3).returning(|_, _, _, _| Err(CopyFailure::Transient("the store is down".into())));
    let pauses = Arc::new(Mutex::new(Vec::new()));
    assert_eq!(copy(store, &pauses).await, Err(CopyFailure::Transient("the store is down".into())));
    assert_eq!(COPY_ATTEMPTS, 3);
    assert_eq!(*pauses.lock().unwrap(), [Duration::from_millis(500), Duration::from_secs(1)]);
}

#[tokio::test]
async fn a_copy_succeeding_on_its_second_try_is_stored() {
    let mut store = MockOutputStore::new();
    let mut tries = 0;
    store.expect_copy().times(2).returning(move |_, _, _, _| {
        tries += 1;
        if tries == 1 { Err(CopyFailure::Transient("busy".into())) } else { Ok(file()) }
    });
    let pauses = Arc::new(Mutex::new(Vec::new()));
    assert_eq!(copy(store, &pauses).await, Ok(file()));
    assert_eq!(pauses.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_permanent_failure_is_not_tried_again() {
    let mut store = MockOutputStore::new();
    store.expect_copy().times(1).returning(|_, _, _, _| Err(CopyFailure::Permanent("too large".into())));
    let pauses = Arc::new(Mutex::new(Vec::new()));
    assert_eq!(copy(store, &pauses).await, Err(CopyFailure::Permanent("too large".into())));
    assert!(pauses.lock().unwrap().is_empty());
}
