//! The waiting half of long-polls and streams. The domain decides what a waiter does next
//! ([`Watch`]: answer now, or wait for the job's next change but no longer than a time); this
//! module does the waiting, racing the job's change notifications against tokio's timer.

use std::time::Duration;

use futures_util::stream::{self, BoxStream, StreamExt};
use genjobs_domain::ids::JobId;
use genjobs_domain::job::Job;
use genjobs_domain::ports::JobChanges;
use genjobs_domain::usecases::{Accounts, Caller, JobEvent, JobQueryError, JobReads, Watch, Woke};

/// The job once it is final, or as it is when `wait` has passed.
///
/// # Errors
/// See [`JobQueryError`].
pub async fn wait_for_job(reads: &JobReads, caller: &Caller, id: JobId, wait: Duration) -> Result<Job, JobQueryError> {
    let mut poll = reads.long_poll(caller, id, wait);
    loop {
        match poll.look().await? {
            Watch::Answer(job) => return Ok(job),
            Watch::Wait(at_most) => {
                next_change_or(poll.changes(), at_most).await;
            }
        }
    }
}

/// The job's events, as [`JobReads::job_events`] describes them.
///
/// # Errors
/// See [`JobQueryError`]; checked before the stream starts.
pub async fn job_events(
    reads: &JobReads,
    caller: &Caller,
    id: JobId,
) -> Result<BoxStream<'static, JobEvent>, JobQueryError> {
    let events = reads.job_events(caller, id).await?;
    Ok(stream::unfold(events, |mut events| async move {
        loop {
            match events.look().await? {
                Watch::Answer(event) => return Some((event, events)),
                Watch::Wait(at_most) => {
                    let woke = next_change_or(events.changes(), at_most).await;
                    events.woken(woke);
                }
            }
        }
    })
    .boxed())
}

/// How often an open stream, long-poll or waiting OpenAI call checks that its key is still
/// valid: a revocation or expiry, of the key or of any key above it, reaches each within a
/// second of its announcement.
const REVALIDATE_EVERY: Duration = Duration::from_millis(500);

/// Resolves once `key` is no longer valid (revoked or expired, itself or an ancestor), checked
/// every [`REVALIDATE_EVERY`]: nothing waits on a job for a key that stopped working. A store
/// that cannot answer ends nothing.
pub async fn key_revoked(accounts: Accounts, key: Option<String>, job_id: JobId) {
    let Some(key) = key else { return std::future::pending().await };
    loop {
        tokio::time::sleep(REVALIDATE_EVERY).await;
        if let Ok(false) = accounts.still_valid(&key).await {
            tracing::info!(%job_id, "the waiting request's key is no longer valid; ending it");
            return;
        }
    }
}

/// Waits for a change notification or `at_most`, whichever comes first. Changes that ended
/// (their source went away) count as the time passing, and leave a waiter to its timer from then on.
async fn next_change_or(changes: &mut JobChanges, at_most: Duration) -> Woke {
    tokio::select! {
        biased;
        change = changes.next() => match change {
            Some(()) => Woke::Changed,
            None => {
                *changes = stream::pending().boxed();
                Woke::TimePassed
            }
        },
        () = tokio::time::sleep(at_most) => Woke::TimePassed,
    }
}
