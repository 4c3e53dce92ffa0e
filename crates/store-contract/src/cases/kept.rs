//! The kept secrets: made once however many starts race, replaced only when asked.

use std::sync::Arc;

use futures_util::future::join_all;
use genjobs_domain::ports::KeptName;

use super::Store;

/// Of eight starts racing on an empty name exactly one keeps its candidate, and all see it;
/// other names are apart; a replacement is what every later start finds.
pub async fn a_kept_secret_is_made_once_and_replaced_only_when_asked<S: Store>(store: Arc<S>) {
    let racing = (0..8u8).map(|i| {
        let store = Arc::clone(&store);
        async move { store.keep_first(KeptName::LinkKey, vec![i; 32]).await.unwrap() }
    });
    let kept = join_all(racing).await;
    assert_eq!(kept.iter().filter(|k| k.made_now).count(), 1, "one start made it");
    let first = kept[0].value.clone();
    assert!(kept.iter().all(|k| k.value == first), "every start sees the one kept");
    assert_eq!(first.len(), 32);

    let other = store.keep_first(KeptName::WebhookSecretKey, b"webhooks".to_vec()).await.unwrap();
    assert!(other.made_now && other.value == b"webhooks", "names are apart");

    store.replace(KeptName::LinkKey, b"replaced".to_vec()).await.unwrap();
    let after = store.keep_first(KeptName::LinkKey, b"candidate".to_vec()).await.unwrap();
    assert!(!after.made_now);
    assert_eq!(after.value, b"replaced");
    store.replace(KeptName::AdminTokenHash, b"first".to_vec()).await.unwrap();
    assert_eq!(store.keep_first(KeptName::AdminTokenHash, vec![]).await.unwrap().value, b"first", "replace keeps");
}
