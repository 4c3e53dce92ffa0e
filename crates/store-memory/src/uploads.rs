//! The uploads port in memory: each content once (until when it is kept, and its bytes when the
//! service has no output store) and what each user uploaded per day, in the store's one lock next
//! to the jobs, so that a content a job not yet final names is never forgotten under it. A
//! forgotten content's bytes are dropped with it: the memory is given back.

use std::collections::HashMap;

use async_trait::async_trait;
use bytes::Bytes;
use genjobs_domain::ids::UserId;
use genjobs_domain::ports::{RecordUploadsError, StoreError, UploadBatch, UploadStore};
use genjobs_domain::upload::UploadDigest;
use time::{Date, OffsetDateTime};

use crate::{MemoryStore, State};

/// The uploads kept, and each user's bytes per day.
#[derive(Debug, Default)]
pub(crate) struct Uploads {
    kept: HashMap<UploadDigest, Kept>,
    days: HashMap<(UserId, Date), u64>,
}

#[derive(Debug)]
struct Kept {
    until: OffsetDateTime,
    bytes: Option<Bytes>,
}

impl State {
    /// The image inputs of the jobs not yet final: an upload one of them names (its link carries
    /// the digest) is still needed.
    fn needed_links(&self) -> Vec<&str> {
        self.jobs
            .values()
            .filter(|row| !row.job.state().is_final())
            .flat_map(|row| row.job.input().image_inputs.iter().map(String::as_str))
            .collect()
    }
}

#[async_trait]
impl UploadStore for MemoryStore {
    async fn record(&self, batch: &UploadBatch) -> Result<Vec<bool>, RecordUploadsError> {
        let mut state = self.state();
        let uploads = &mut state.uploads;
        let size: u64 = batch.uploads.iter().map(|upload| upload.size).sum();
        let used = uploads.days.entry((batch.user_id, batch.day)).or_default();
        let total = used.checked_add(size).filter(|total| *total <= batch.quota);
        *used = total.ok_or(RecordUploadsError::QuotaExceeded)?;
        Ok(batch
            .uploads
            .iter()
            .map(|upload| {
                let kept =
                    uploads.kept.entry(upload.digest.clone()).or_insert(Kept { until: batch.keep_until, bytes: None });
                kept.until = kept.until.max(batch.keep_until);
                kept.bytes.is_some()
            })
            .collect())
    }

    async fn put_bytes(&self, digest: &UploadDigest, bytes: Bytes) -> Result<(), StoreError> {
        if let Some(kept) = self.state().uploads.kept.get_mut(digest) {
            kept.bytes.get_or_insert(bytes);
        }
        Ok(())
    }

    async fn bytes(&self, digest: &UploadDigest) -> Result<Option<Bytes>, StoreError> {
        Ok(self.state().uploads.kept.get(digest).and_then(|kept| kept.bytes.clone()))
    }

    async fn remove_expired(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<UploadDigest>, StoreError> {
        let mut state = self.state();
        let yesterday = now.date().previous_day().unwrap_or(Date::MIN);
        state.uploads.days.retain(|(_, day), _| *day >= yesterday);
        let past: Vec<&UploadDigest> =
            state.uploads.kept.iter().filter(|(_, kept)| kept.until < now).map(|(digest, _)| digest).collect();
        // The jobs are walked only when some upload is past its time: most sweeps find none.
        if past.is_empty() {
            return Ok(Vec::new());
        }
        let needed = state.needed_links();
        let expired: Vec<UploadDigest> = past
            .into_iter()
            .filter(|digest| !needed.iter().any(|link| link.contains(digest.as_str())))
            .take(limit)
            .cloned()
            .collect();
        for digest in &expired {
            state.uploads.kept.remove(digest);
        }
        Ok(expired)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

    use genjobs_domain::ports::NewUpload;

    use super::*;

    /// A forgotten upload's bytes are dropped: the store holds no reference to them any more.
    #[tokio::test]
    async fn an_expired_upload_gives_its_memory_back() {
        let store = MemoryStore::new();
        let bytes = Bytes::from(vec![7u8; 1 << 20]);
        let digest = UploadDigest::of(&bytes);
        let now = OffsetDateTime::now_utc();
        let batch = UploadBatch {
            user_id: UserId::new_at(now),
            day: now.date(),
            quota: 1 << 30,
            keep_until: now,
            uploads: vec![NewUpload { digest: digest.clone(), size: bytes.len() as u64 }],
        };
        assert_eq!(store.record(&batch).await.unwrap(), [false]);
        store.put_bytes(&digest, bytes.clone()).await.unwrap();
        assert!(!bytes.is_unique(), "the store holds the bytes");
        assert_eq!(store.remove_expired(now, 10).await.unwrap(), [], "not yet past its time");
        assert_eq!(
            store.remove_expired(now + time::Duration::SECOND, 10).await.unwrap(),
            std::slice::from_ref(&digest)
        );
        assert!(bytes.is_unique(), "the store let go of the bytes");
        assert_eq!(store.bytes(&digest).await.unwrap(), None);
    }
}
