//! Uploads: each content recorded once and its bytes kept once; a user's day counted against
//! its quota exactly, even under concurrent uploads, and nothing recorded past it; an expired
//! content forgotten with its bytes unless a job not yet final names it.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::join_all;
use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use genjobs_domain::ids::{JobId, ModelId, UserId};
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::{Job, Trigger};
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{NewUpload, RecordUploadsError, UploadBatch};
use time::Duration;

use super::{Store, input, now, step, user};

fn batch(user_id: UserId, quota: u64, contents: &[(&UploadDigestOf, u64)]) -> UploadBatch {
    UploadBatch {
        user_id,
        day: now().date(),
        quota,
        keep_until: now(),
        uploads: contents.iter().map(|(digest, size)| NewUpload { digest: digest.digest(), size: *size }).collect(),
    }
}

/// The bytes of a content, and its digest.
struct UploadDigestOf(&'static [u8]);

impl UploadDigestOf {
    fn digest(&self) -> genjobs_domain::upload::UploadDigest {
        genjobs_domain::upload::UploadDigest::of(self.0)
    }
}

const X: UploadDigestOf = UploadDigestOf(b"first image");
const Y: UploadDigestOf = UploadDigestOf(b"second image");

/// The same content recorded again says its bytes are held, and they are put once; past the
/// day's quota nothing of the batch is recorded; each user and each day counts apart.
pub async fn an_upload_is_kept_once_per_content_within_the_days_quota<S: Store>(store: Arc<S>) {
    let (id, other) = (user(&*store, 1).await, user(&*store, 1).await);
    assert_eq!(store.record(&batch(id, 0, &[])).await.unwrap(), Vec::<bool>::new(), "nothing to record");
    assert_eq!(store.record(&batch(id, 25, &[(&X, 10)])).await.unwrap(), [false]);
    store.put_bytes(&X.digest(), Bytes::from_static(X.0)).await.unwrap();
    store.put_bytes(&X.digest(), Bytes::from_static(b"not again")).await.unwrap();
    assert_eq!(store.bytes(&X.digest()).await.unwrap().as_deref(), Some(X.0), "the first bytes stay");
    assert_eq!(store.record(&batch(id, 25, &[(&X, 10)])).await.unwrap(), [true], "held: counted, not put");

    let over = store.record(&batch(id, 25, &[(&Y, 3), (&Y, 3)])).await;
    assert_eq!(over, Err(RecordUploadsError::QuotaExceeded), "20 + 6 > 25");
    store.put_bytes(&Y.digest(), Bytes::from_static(Y.0)).await.unwrap();
    assert_eq!(store.bytes(&Y.digest()).await.unwrap(), None, "nothing of the refused batch was recorded");
    assert_eq!(store.record(&batch(id, 25, &[(&Y, 5)])).await.unwrap(), [false], "exactly up to the quota");
    assert_eq!(store.record(&batch(other, 25, &[(&Y, 25)])).await.unwrap(), [false], "another user's day");
    let tomorrow = UploadBatch { day: now().date().next_day().unwrap(), ..batch(id, 25, &[(&Y, 25)]) };
    assert_eq!(store.record(&tomorrow).await.unwrap(), [false], "another day");
}

/// Concurrent uploads of one user together take the day exactly to its quota, never past it.
pub async fn concurrent_uploads_never_pass_the_days_quota<S: Store>(store: Arc<S>) {
    let id = user(&*store, 1).await;
    let tries = (0..20).map(|_| {
        let store = Arc::clone(&store);
        async move { store.record(&batch(id, 100, &[(&X, 10)])).await }
    });
    let results = join_all(tries).await;
    let kept = results.iter().filter(|result| result.is_ok()).count();
    assert_eq!(kept, 10, "{results:?}");
    assert!(results.iter().all(|result| matches!(result, Ok(_) | Err(RecordUploadsError::QuotaExceeded))));
}

/// A job of `user_id` whose image input is a link to content `digest`.
async fn job_naming<S: Store>(store: &S, user_id: UserId, digest: &UploadDigestOf) -> Job {
    let link = format!("https://gen.example/api/v1/uploads/{}.png?expires=1&sig=00", digest.digest());
    let input = GenerationInput { image_inputs: vec![link], ..input() };
    let rate = Rate { per: Unit::Image, credits: 1, percent: PricePercent::FULL, batch_percent: PricePercent::FULL };
    let job =
        Job::accept(JobId::new_at(now()), user_id, ModelId::new("nano-banana"), Modality::Image, input, rate, now()).0;
    store.accept(job.clone(), None, None, now()).await.expect("accept");
    job
}

/// Contents past their time are forgotten with their bytes, oldest first and `limit` at a time,
/// except one a job not yet final names, which is forgotten once the job is final.
pub async fn expired_uploads_are_removed_unless_a_job_not_yet_final_names_them<S: Store>(store: Arc<S>) {
    let id = user(&*store, 10).await;
    store.record(&batch(id, 100, &[(&X, 10), (&Y, 10)])).await.unwrap();
    store.put_bytes(&Y.digest(), Bytes::from_static(Y.0)).await.unwrap();
    let job = job_naming(&*store, id, &X).await;
    assert_eq!(store.remove_expired(now() - Duration::SECOND, 10).await.unwrap(), [], "not yet past their time");
    let later = now() + Duration::SECOND;
    assert_eq!(store.remove_expired(later, 10).await.unwrap(), [Y.digest()], "X is named by a running job");
    assert_eq!(store.bytes(&Y.digest()).await.unwrap(), None, "forgotten with its bytes");
    assert_eq!(store.record(&batch(id, 100, &[(&Y, 1)])).await.unwrap(), [false], "a new content again");
    step(&*store, &job, Trigger::Cancel).await;
    let mut removed = store.remove_expired(later, 10).await.unwrap();
    removed.sort();
    let mut expected = vec![X.digest(), Y.digest()];
    expected.sort();
    assert_eq!(removed, expected, "the job is final");
}
