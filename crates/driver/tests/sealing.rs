//! The sealing check: it seals day after day until the store has none ready, and stops at the
//! store's first error.

use genjobs_domain::ports::{MockClock, MockUsageStore, StoreError};
use genjobs_driver::sealing::seal_ready_days;
use mockall::Sequence;
use time::macros::{date, datetime};

fn clock() -> MockClock {
    let mut clock = MockClock::new();
    clock.expect_now().return_const(datetime!(2026-11-26 06:00 UTC));
    clock
}

#[tokio::test]
async fn every_ready_day_is_sealed_oldest_first_and_the_last_is_returned() {
    let mut usage = MockUsageStore::new();
    let mut order = Sequence::new();
    for day in [Some(date!(2026 - 11 - 24)), Some(date!(2026 - 11 - 25)), None] {
        usage.expect_seal_usage_day().times(1).in_sequence(&mut order).return_once(move |_| Ok(day));
    }
    assert_eq!(seal_ready_days(&usage, &clock()).await, Ok(Some(date!(2026 - 11 - 25))));
}

#[tokio::test]
async fn a_store_error_ends_the_check_and_is_returned() {
    let mut usage = MockUsageStore::new();
    let mut order = Sequence::new();
    usage.expect_seal_usage_day().times(1).in_sequence(&mut order).return_once(|_| Ok(Some(date!(2026 - 11 - 24))));
    usage
        .expect_seal_usage_day()
        .times(1)
        .in_sequence(&mut order)
        .return_once(|_| Err(StoreError::Unavailable("down".into())));
    assert_eq!(seal_ready_days(&usage, &clock()).await, Err(StoreError::Unavailable("down".into())));
}
