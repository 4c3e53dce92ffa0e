//! The catalog ports: where model documents are kept ([`CatalogStore`]), and what each provider
//! knows of its own endpoints to check a route without calling it ([`RouteSchemas`]).

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use time::OffsetDateTime;

use super::StoreError;
use crate::catalog::{DocumentFault, Model, ModelDocument, Route};
use crate::ids::ModelId;

/// One stored model document.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredModel {
    /// The model's id.
    pub id: ModelId,
    /// The document as last put (without its id).
    pub document: ModelDocument,
    /// The catalog version of its last change.
    pub version: u64,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
    /// Deleted: no longer offered, kept so that its accepted jobs still run.
    pub deleted: bool,
}

/// Whether a put made a model or replaced one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The id was new (or its model had been deleted).
    Created,
    /// A model with the id existed and was replaced.
    Replaced,
}

impl PutOutcome {
    /// `created` or `replaced`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            PutOutcome::Created => "created",
            PutOutcome::Replaced => "replaced",
        }
    }
}

/// Changes applied together or not at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogChanges {
    /// Documents to put, by id.
    pub puts: Vec<(ModelId, ModelDocument)>,
    /// Models to delete.
    pub deletes: Vec<ModelId>,
}

/// Where the catalog is kept. Each change takes the next catalog version, and the store tells
/// every process that serves it ([`CatalogStore::catalog_changes`]).
///
/// # Errors
/// [`StoreError::Unavailable`] when the store cannot be reached, [`StoreError::Internal`] for a
/// document it cannot read back.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait CatalogStore: Send + Sync {
    /// Every document, deleted ones included, in the order the models were first put.
    async fn list_models(&self) -> Result<Vec<StoredModel>, StoreError>;

    /// The model with this id, unless deleted.
    async fn get_model(&self, id: &ModelId) -> Result<Option<StoredModel>, StoreError>;

    /// Stores `document` as the model `id`, new or replacing the one there.
    async fn put_model(&self, id: &ModelId, document: &ModelDocument) -> Result<PutOutcome, StoreError>;

    /// Deletes the model `id`; `false` when there is none (or it was deleted already).
    async fn delete_model(&self, id: &ModelId) -> Result<bool, StoreError>;

    /// Applies every change in one step: all or none.
    async fn apply_models(&self, changes: &CatalogChanges) -> Result<(), StoreError>;

    /// Stores `documents` only if the store never held a model (deleted ones count), so that
    /// the built-in catalog fills a new store once and never comes back over the operator's.
    /// Whether it stored them.
    async fn seed_models(&self, documents: &[(ModelId, ModelDocument)]) -> Result<bool, StoreError>;

    /// One item whenever the catalog may have changed, from any process that serves this
    /// store; a missed one is caught by the periodic reload.
    fn catalog_changes(&self) -> BoxStream<'static, ()>;
}

/// What a provider adapter knows of its own endpoints, to check the routes that name it when a
/// model is put: from the schemas the service holds, never by calling the provider, and whether
/// or not the provider is configured.
///
/// # Errors
/// [`DocumentFault`] with the path of the fault within the route (`endpoint`,
/// `params.aspect_ratio`).
#[cfg_attr(feature = "mocks", mockall::automock)]
pub trait RouteSchemas: Send + Sync {
    /// The provider's name, as routes name it.
    fn provider(&self) -> &'static str;

    /// Checks one route of `model` that names this provider.
    fn check_route(&self, model: &Model, route: &Route) -> Result<(), DocumentFault>;
}
