//! Removals: a removed job leaves the pages of kept jobs and is marked removed, once; the job,
//! its credits and its ledger stay.

use std::sync::Arc;

use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use genjobs_domain::ids::{JobId, ModelId, UserId};
use genjobs_domain::job::{Job, Trigger};
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{KeptPage, PageOrder};
use time::Duration;

use super::{LIMITS, Limits, Store, accepted, b, balances, input, now, step, user_with};

/// A video job of `user_id` holding 1 credit, accepted at `now() + offset_ms`.
async fn video<S: Store>(store: &S, user_id: UserId, offset_ms: i64) -> Job {
    let at = now() + Duration::milliseconds(offset_ms);
    let job = Job::accept(
        JobId::new_at(at),
        user_id,
        ModelId::new("seedance-2.0-fast"),
        Modality::Video,
        input(),
        Rate { per: Unit::Image, credits: 1, percent: PricePercent::FULL, batch_percent: PricePercent::FULL },
        at,
    )
    .0;
    store.accept(job.clone(), None, None, now()).await.expect("accept");
    job
}

fn page(after: Option<JobId>, order: PageOrder, limit: usize) -> KeptPage {
    KeptPage { modality: Modality::Video, after, order, limit }
}

async fn ids<S: Store>(store: &S, user_id: UserId, page: KeptPage) -> Vec<JobId> {
    store.kept_jobs(user_id, page).await.expect("kept jobs").iter().map(Job::id).collect()
}

/// Pages of kept jobs hold the user's jobs of one modality, either way, after a cursor, without
/// the removed ones; removing is once, and leaves the job and its credits as they were.
pub async fn removed_jobs_leave_the_kept_pages_and_keep_their_credits<S: Store>(store: Arc<S>) {
    let id = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let other = user_with(&*store, 100, LIMITS).await;
    video(&*store, other, 0).await;
    accepted(&*store, id, 1).await;
    let mut videos = Vec::new();
    for i in 0..4 {
        videos.push(video(&*store, id, i + 1).await.id());
    }
    assert_eq!(
        ids(&*store, id, page(None, PageOrder::Ascending, 10)).await,
        videos,
        "images and others' jobs left out"
    );
    assert_eq!(ids(&*store, id, page(Some(videos[1]), PageOrder::Ascending, 1)).await, videos[2..3]);
    let newest_first: Vec<_> = videos.iter().rev().copied().collect();
    assert_eq!(ids(&*store, id, page(None, PageOrder::Descending, 2)).await, newest_first[..2]);
    assert_eq!(
        ids(&*store, id, page(Some(videos[2]), PageOrder::Descending, 10)).await,
        videos[..2].iter().rev().copied().collect::<Vec<_>>()
    );

    let (before, _) = balances(&*store, id).await;
    let running = store.job(videos[1]).await.unwrap().unwrap();
    let canceled = step(&*store, &running, Trigger::Cancel).await;
    assert!(!store.is_removed(videos[1]).await.unwrap());
    assert!(store.remove(videos[1], now()).await.unwrap(), "removed once");
    assert!(!store.remove(videos[1], now()).await.unwrap(), "not twice");
    assert!(!store.remove(JobId::new_at(now()), now()).await.unwrap(), "no such job");
    assert!(store.is_removed(videos[1]).await.unwrap() && !store.is_removed(videos[0]).await.unwrap());
    let kept = ids(&*store, id, page(None, PageOrder::Ascending, 10)).await;
    assert_eq!(kept, [videos[0], videos[2], videos[3]]);
    assert_eq!(
        ids(&*store, id, page(Some(videos[0]), PageOrder::Ascending, 1)).await,
        [videos[2]],
        "a cursor skips it"
    );
    assert_eq!(store.job(videos[1]).await.unwrap(), Some(canceled), "the job stays");
    let (after, _) = balances(&*store, id).await;
    assert_eq!(after, b(before.available.get() + 1, before.held.get() - 1, 0), "only the cancel moved credits");
    assert_eq!(store.jobs_of(id, None, 10).await.unwrap().len(), 5, "the native listing keeps it");
}
