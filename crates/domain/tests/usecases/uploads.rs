//! Uploads kept for edits: what is kept, once per content, within the quota.

use super::*;

#[tokio::test]
async fn an_upload_is_kept_only_when_it_is_an_image_within_the_limit() {
    let png = bytes::Bytes::from_static(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let mut outputs = MockOutputStore::new();
    outputs.expect_keep_upload().times(1).returning(|_, _| Ok(()));
    let mut store = MockUploadStore::new();
    store.expect_record().times(1).returning(|batch| Ok(vec![false; batch.uploads.len()]));
    let ports = Ports { outputs: Some(Arc::new(outputs)), uploads: Arc::new(store), ..Mocks::new().ports() };
    let uploads = Uploads::new(&ports, genjobs_domain::upload::UploadSettings::default());
    let kept = uploads.keep(&caller(), png.clone()).await.unwrap();
    assert_eq!(kept.format, genjobs_domain::upload::ImageFormat::Png);
    assert_eq!(kept.digest, genjobs_domain::upload::UploadDigest::of(&png), "named by its content");
    let text = bytes::Bytes::from_static(b"<svg xmlns='http://www.w3.org/2000/svg'/>");
    assert_eq!(uploads.keep(&caller(), text).await, Err(UploadError::NotAnImage), "judged by its bytes");
    let mut large = b"\x89PNG\r\n\x1a\n".to_vec();
    large.resize(genjobs_domain::upload::MAX_UPLOAD_BYTES + 1, 0);
    assert_eq!(uploads.keep(&caller(), large.into()).await, Err(UploadError::TooLarge));
}

/// Without an output store, the upload store keeps the bytes, once per content; past the quota
/// nothing is kept.
#[tokio::test]
async fn uploads_without_an_output_store_are_kept_once_per_content_within_the_quota() {
    let png = bytes::Bytes::from_static(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let mut store = MockUploadStore::new();
    let mut answers = vec![Err(RecordUploadsError::QuotaExceeded), Ok(vec![true]), Ok(vec![false])];
    store.expect_record().times(3).returning(move |_| answers.pop().unwrap());
    store.expect_put_bytes().times(1).returning(|_, _| Ok(()));
    let ports = Ports { uploads: Arc::new(store), ..Mocks::new().ports() };
    let settings = genjobs_domain::upload::UploadSettings { bytes_per_day: 100, ..Default::default() };
    let uploads = Uploads::new(&ports, settings);
    assert!(uploads.keep(&caller(), png.clone()).await.is_ok(), "new: its bytes put");
    assert!(uploads.keep(&caller(), png.clone()).await.is_ok(), "held: not put again");
    assert_eq!(uploads.keep(&caller(), png).await, Err(UploadError::QuotaExceeded { quota: 100 }));
}
