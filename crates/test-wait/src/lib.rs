//! # genjobs-test-wait
//!
//! How genjobs' tests wait for what happens in the background: on a condition, with a deadline
//! that fails the test, never for a fixed time. A fixed sleep is either too short on a loaded
//! machine (a flaky test) or longer than needed everywhere else (a slow one).
//!
//! Both helpers check the condition, then pause [`PAUSE`] before checking again: that short
//! sleep between checks, inside these helpers, is the accepted form of sleeping in a test. They
//! use tokio's clock, so under a paused clock (`#[tokio::test(start_paused = true)]`) the pauses
//! and the deadline take no wall-clock time.

use std::fmt::Debug;
use std::time::Duration;

/// How long the helpers pause between two checks.
pub const PAUSE: Duration = Duration::from_millis(50);

/// Waits until `check` holds or `limit` passes; whether it held. For a caller that asserts with
/// a message of its own.
pub async fn eventually(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(PAUSE).await;
    }
    check().await
}

/// Reads with `read` until `done` holds of what it read, for at most `limit`; returns that read.
///
/// # Panics
/// When `limit` passes first, naming `what` was awaited and showing the last read.
pub async fn wait_until<T: Debug>(
    limit: Duration,
    what: &str,
    mut read: impl AsyncFnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let mut last = None;
    let held = eventually(limit, async || {
        let value = read().await;
        let held = done(&value);
        last = Some(value);
        held
    })
    .await;
    let last = last.expect("eventually checks at least once");
    assert!(held, "{what}: not within {limit:?}; last read: {last:?}");
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_condition_that_comes_true_ends_the_wait_at_once() {
        let started = tokio::time::Instant::now();
        let mut reads = 0;
        let read = wait_until(
            Duration::from_secs(10),
            "the third read",
            async || {
                reads += 1;
                reads
            },
            |n| *n == 3,
        )
        .await;
        assert_eq!(read, 3);
        assert_eq!(started.elapsed(), 2 * PAUSE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_condition_that_never_holds_is_false_at_the_deadline() {
        let started = tokio::time::Instant::now();
        assert!(!eventually(Duration::from_secs(1), async || false).await);
        assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "the answer: not within 1s; last read: 41")]
    async fn a_wait_past_its_deadline_panics_with_the_last_read() {
        wait_until(Duration::from_secs(1), "the answer", async || 41, |n| *n == 42).await;
    }
}
