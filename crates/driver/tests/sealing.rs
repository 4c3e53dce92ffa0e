//! The sealing check: it seals stretch after stretch until the store has none ready, and stops
//! at the store's first error.

use genjobs_domain::ports::{MockClock, MockUsageStore, StoreError};
use genjobs_driver::sealing::seal_ready_hours;
use mockall::Sequence;
use time::macros::datetime;

fn clock() -> MockClock {
    let mut clock = MockClock::new();
    clock.expect_now().return_const(datetime!(2026-11-26 06:20 UTC));
    clock
}

#[tokio::test]
async fn every_ready_stretch_is_sealed_oldest_first_and_the_last_end_is_returned() {
    let mut usage = MockUsageStore::new();
    let mut order = Sequence::new();
    for until in [Some(datetime!(2026-11-25 00:00 UTC)), Some(datetime!(2026-11-26 06:00 UTC)), None] {
        usage.expect_seal_usage().times(1).in_sequence(&mut order).return_once(move |_| Ok(until));
    }
    assert_eq!(seal_ready_hours(&usage, &clock()).await, Ok(Some(datetime!(2026-11-26 06:00 UTC))));
}

#[tokio::test]
async fn a_store_error_ends_the_check_and_is_returned() {
    let mut usage = MockUsageStore::new();
    let mut order = Sequence::new();
    usage
        .expect_seal_usage()
        .times(1)
        .in_sequence(&mut order)
        .return_once(|_| Ok(Some(datetime!(2026-11-25 00:00 UTC))));
    usage
        .expect_seal_usage()
        .times(1)
        .in_sequence(&mut order)
        .return_once(|_| Err(StoreError::Unavailable("down".into())));
    assert_eq!(seal_ready_hours(&usage, &clock()).await, Err(StoreError::Unavailable("down".into())));
}
