//! OpenAI's Batch API: a file is kept with its content; an OpenAI batch is kept, replaced
//! (failed with its line errors), forgotten, and listed newest first by owner.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use genjobs_domain::ids::{BatchId, FileId, KeyPrefix, UserId};
use genjobs_domain::openai_batch::{BatchFile, LineError, OpenAiBatch};
use time::Duration;

use super::{Store, now, user};

fn file(user_id: UserId, bytes: u64) -> BatchFile {
    let at = now();
    BatchFile {
        id: FileId::new_at(at),
        user_id,
        key_prefix: Some(KeyPrefix::of("gj_0123456789ab")),
        filename: "requests.jsonl".into(),
        bytes,
        created_at: at,
    }
}

fn batch(user_id: UserId, input_file_id: FileId, offset_ms: i64) -> OpenAiBatch {
    let at = now() + Duration::milliseconds(offset_ms);
    OpenAiBatch {
        id: BatchId::new_at(at),
        user_id,
        key_prefix: None,
        input_file_id,
        endpoint: "/v1/images/generations".into(),
        completion_window: "24h".into(),
        created_at: at,
        metadata: BTreeMap::from([("project".to_owned(), "atlas".to_owned())]),
        errors: Vec::new(),
    }
}

/// A file reads back as kept, its content apart; an unknown one is `None`.
pub async fn a_batch_file_is_kept_with_its_content<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 10).await;
    let content = Bytes::from_static(b"{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\"}\n");
    let kept = file(owner, content.len() as u64);
    store.put_file(&kept, content.clone()).await.expect("put file");
    assert_eq!(store.file(kept.id).await.expect("file"), Some(kept.clone()));
    assert_eq!(store.file_content(kept.id).await.expect("content"), Some(content));
    let unknown = FileId::new_at(now());
    assert_eq!(store.file(unknown).await.expect("file"), None);
    assert_eq!(store.file_content(unknown).await.expect("content"), None);
}

/// A batch is read back, replaced by its failure, forgotten; a user's are listed newest first
/// before a cursor, without another user's.
pub async fn openai_batches_are_kept_replaced_and_listed_newest_first<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 10).await;
    let other = user(&*store, 10).await;
    let input = file(owner, 1);
    store.put_file(&input, Bytes::from_static(b"{}")).await.expect("put file");
    let others_input = file(other, 1);
    store.put_file(&others_input, Bytes::from_static(b"{}")).await.expect("put file");
    let mut made = Vec::new();
    for i in 0..3 {
        let kept = batch(owner, input.id, i);
        store.put_openai_batch(&kept).await.expect("put batch");
        made.push(kept);
    }
    store.put_openai_batch(&batch(other, others_input.id, 5)).await.expect("put batch");
    assert_eq!(store.openai_batch(made[0].id).await.expect("batch"), Some(made[0].clone()));

    let mut failed = made[1].clone();
    failed.errors = vec![
        LineError {
            code: "invalid_request".into(),
            message: "no prompt".into(),
            param: Some("body.prompt".into()),
            line: Some(3),
        },
        LineError { code: "invalid_request".into(), message: "too many".into(), param: None, line: None },
    ];
    store.put_openai_batch(&failed).await.expect("replace batch");
    assert_eq!(store.openai_batch(failed.id).await.expect("batch"), Some(failed.clone()));

    let ids = |batches: Vec<OpenAiBatch>| batches.into_iter().map(|b| b.id).collect::<Vec<_>>();
    let listed = store.openai_batches(owner, None, 10).await.expect("list");
    assert_eq!(ids(listed), [made[2].id, made[1].id, made[0].id], "newest first, only the owner's");
    let page = store.openai_batches(owner, Some(made[2].id), 1).await.expect("list");
    assert_eq!(ids(page), [made[1].id]);

    store.remove_openai_batch(made[0].id).await.expect("remove");
    assert_eq!(store.openai_batch(made[0].id).await.expect("batch"), None);
    assert_eq!(ids(store.openai_batches(owner, None, 10).await.expect("list")), [made[2].id, made[1].id]);
}
