//! The catalog port's cases: puts say whether they created or replaced, deletes keep a
//! tombstone that listing marks, every change takes a higher version, a batch applies whole, and
//! the initial catalog fills only a store that never held a model.

use std::sync::Arc;

use genjobs_domain::catalog::{Catalog, ModelDocument};
use genjobs_domain::ids::ModelId;
use genjobs_domain::ports::{CatalogChanges, PutOutcome};

use super::Store;

fn document(credits: u64) -> ModelDocument {
    let mut document = Catalog::builtin_documents().unwrap().remove(0);
    document.id = None;
    document.price.credits = credits;
    document
}

fn id(name: &str) -> ModelId {
    ModelId::new(name)
}

/// A put creates, a second replaces, reads give back what was put, and models are listed in
/// the order they were first put.
pub async fn models_are_put_and_read_back<S: Store>(store: Arc<S>) {
    assert_eq!(store.put_model(&id("m1"), &document(3)).await.unwrap(), PutOutcome::Created);
    assert_eq!(store.put_model(&id("a0"), &document(1)).await.unwrap(), PutOutcome::Created);
    assert_eq!(store.put_model(&id("m1"), &document(5)).await.unwrap(), PutOutcome::Replaced);
    let stored = store.get_model(&id("m1")).await.unwrap().unwrap();
    assert_eq!((stored.document, stored.deleted), (document(5), false));
    assert!(store.get_model(&id("m2")).await.unwrap().is_none());
    let listed = store.list_models().await.unwrap();
    assert_eq!(listed.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["m1", "a0"]);
}

/// Every change takes a higher version than any before, deletes included.
pub async fn every_catalog_change_takes_a_higher_version<S: Store>(store: Arc<S>) {
    let version = async |name: &str| {
        store.list_models().await.unwrap().into_iter().find(|m| m.id.as_str() == name).unwrap().version
    };
    store.put_model(&id("a"), &document(1)).await.unwrap();
    let first = version("a").await;
    store.put_model(&id("b"), &document(1)).await.unwrap();
    let second = version("b").await;
    assert!(store.delete_model(&id("a")).await.unwrap());
    let third = version("a").await;
    store.put_model(&id("b"), &document(2)).await.unwrap();
    let fourth = version("b").await;
    assert!(0 < first && first < second && second < third && third < fourth, "{first} {second} {third} {fourth}");
}

/// A deleted model is gone for `get`, listed as deleted (its jobs still run), deleted only
/// once, and a put brings it back as new.
pub async fn a_deleted_model_is_a_tombstone_until_put_again<S: Store>(store: Arc<S>) {
    store.put_model(&id("gone"), &document(2)).await.unwrap();
    assert!(store.delete_model(&id("gone")).await.unwrap());
    assert!(!store.delete_model(&id("gone")).await.unwrap(), "deleted twice");
    assert!(!store.delete_model(&id("never")).await.unwrap());
    assert!(store.get_model(&id("gone")).await.unwrap().is_none());
    let listed = store.list_models().await.unwrap();
    assert!(listed.iter().any(|m| m.id.as_str() == "gone" && m.deleted && m.document == document(2)));
    assert_eq!(store.put_model(&id("gone"), &document(4)).await.unwrap(), PutOutcome::Created);
    assert!(!store.get_model(&id("gone")).await.unwrap().unwrap().deleted);
}

/// A batch applies its puts and deletes together.
pub async fn catalog_changes_apply_together<S: Store>(store: Arc<S>) {
    store.put_model(&id("old"), &document(1)).await.unwrap();
    let changes = CatalogChanges { puts: vec![(id("new"), document(7)), (id("old"), document(8))], deletes: vec![] };
    store.apply_models(&changes).await.unwrap();
    let changes = CatalogChanges { puts: vec![], deletes: vec![id("old")] };
    store.apply_models(&changes).await.unwrap();
    let live: Vec<_> = store.list_models().await.unwrap().into_iter().filter(|m| !m.deleted).collect();
    assert_eq!(live.len(), 1);
    assert_eq!((live[0].id.as_str(), live[0].document.price.credits), ("new", 7));
}

/// The initial catalog fills a store once, and never one that held a model, deleted or not.
pub async fn the_initial_catalog_fills_only_a_store_that_never_held_a_model<S: Store>(store: Arc<S>) {
    let initial = [(id("x"), document(1)), (id("y"), document(1))];
    assert!(store.seed_models(&initial).await.unwrap());
    assert!(!store.seed_models(&initial).await.unwrap());
    assert!(store.delete_model(&id("x")).await.unwrap());
    assert!(store.delete_model(&id("y")).await.unwrap());
    assert!(!store.seed_models(&initial).await.unwrap(), "the operator deleted every model: it stays so");
    assert!(store.list_models().await.unwrap().iter().all(|m| m.deleted));
}
