//! The operator's catalog: models put, deleted or applied as a whole while the service runs,
//! each checked before it is stored (its form, its price, and each route against what its
//! provider knows of its endpoints), and the snapshot every use case reads kept current: after
//! each change here at once, on other processes when the store announces a change, and by a
//! periodic reload in case an announcement was missed.

use super::Admin;
use crate::catalog::{Catalog, DocumentFault, Model, ModelDocument};
use crate::ids::ModelId;
use crate::invalid::InvalidRequest;
use crate::ports::{CatalogChanges, PutOutcome, StoreError};

/// Why a catalog change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogAdminError {
    /// 400: the document is not valid; `param` is the JSON path of the fault.
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    /// 404: no such model.
    #[error("no model with this id")]
    UnknownModel,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<DocumentFault> for InvalidRequest {
    fn from(fault: DocumentFault) -> Self {
        InvalidRequest { param: Some(fault.path), message: fault.message }
    }
}

/// One model a catalog file changes: what the store has and what the file says (`None` for
/// absent).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedChange {
    /// The model.
    pub id: ModelId,
    /// The stored document, if any.
    pub before: Option<ModelDocument>,
    /// The file's document, if any.
    pub after: Option<ModelDocument>,
}

impl Admin {
    /// Checks a document for the model `id`: its own rules, then each route by its provider.
    ///
    /// # Errors
    /// [`InvalidRequest`] whose `param` is the JSON path of the first fault, e.g.
    /// `routes[0].provider` for a provider the service does not know, `routes[0].endpoint` for
    /// an endpoint the provider does not have.
    pub fn check_model(&self, id: &str, document: ModelDocument) -> Result<Model, InvalidRequest> {
        let model = Model::from_document(id, document)?;
        for (index, route) in model.routes.iter().enumerate() {
            let at = format!("routes[{index}]");
            let schemas =
                self.ports.route_schemas.iter().find(|s| s.provider() == route.provider).ok_or_else(|| {
                    DocumentFault::at(
                        format!("{at}.provider"),
                        format!("no provider named {:?} is known", route.provider),
                    )
                })?;
            schemas.check_route(&model, route).map_err(|fault| fault.under(&at))?;
        }
        Ok(model)
    }

    /// Stores the model `id` (new or replacing one) and puts it in effect here at once; other
    /// processes follow within their reload ([`Admin::reload_catalog`], which each replica's driver
    /// runs on every change the store announces).
    ///
    /// # Errors
    /// [`CatalogAdminError::Invalid`] naming the fault; [`CatalogAdminError::Store`].
    pub async fn put_model(&self, id: &str, document: ModelDocument) -> Result<PutOutcome, CatalogAdminError> {
        let model = self.check_model(id, document)?;
        let outcome = self.ports.catalog.put_model(&model.id, &model.document()).await?;
        tracing::info!(model = %model.id, outcome = outcome.as_str(), "catalog model put");
        self.reload_catalog().await?;
        Ok(outcome)
    }

    /// Deletes the model `id`: it is no longer listed nor accepted; its jobs stay readable and
    /// those running finish.
    ///
    /// # Errors
    /// [`CatalogAdminError::UnknownModel`]; [`CatalogAdminError::Store`].
    pub async fn delete_model(&self, id: &str) -> Result<(), CatalogAdminError> {
        if !self.ports.catalog.delete_model(&ModelId::new(id)).await? {
            return Err(CatalogAdminError::UnknownModel);
        }
        tracing::info!(model = id, "catalog model deleted");
        self.reload_catalog().await?;
        Ok(())
    }

    /// What applying `documents` as the whole catalog would change, every document checked:
    /// models added, replaced, and deleted (those the store has and the file does not).
    ///
    /// # Errors
    /// [`CatalogAdminError::Invalid`] with `param` `models[i]…` for the first faulty document.
    pub async fn plan_catalog(&self, documents: Vec<ModelDocument>) -> Result<Vec<PlannedChange>, CatalogAdminError> {
        let models = self.checked(documents)?;
        let stored: Vec<_> = self.ports.catalog.list_models().await?.into_iter().filter(|m| !m.deleted).collect();
        let mut planned = Vec::new();
        for model in &models {
            let before = stored.iter().find(|s| s.id == model.id).map(|s| s.document.clone());
            let after = ModelDocument { id: None, ..model.document() };
            if before.as_ref() != Some(&after) {
                planned.push(PlannedChange { id: model.id.clone(), before, after: Some(after) });
            }
        }
        for gone in stored.into_iter().filter(|s| !models.iter().any(|m| m.id == s.id)) {
            planned.push(PlannedChange { id: gone.id, before: Some(gone.document), after: None });
        }
        Ok(planned)
    }

    /// Applies a plan of [`Admin::plan_catalog`] in one store transaction.
    ///
    /// # Errors
    /// [`CatalogAdminError::Store`]; nothing is applied then.
    pub async fn apply_catalog(&self, plan: &[PlannedChange]) -> Result<(), CatalogAdminError> {
        let mut changes = CatalogChanges::default();
        for change in plan {
            match &change.after {
                Some(document) => changes.puts.push((change.id.clone(), document.clone())),
                None => changes.deletes.push(change.id.clone()),
            }
        }
        self.ports.catalog.apply_models(&changes).await?;
        tracing::info!(puts = changes.puts.len(), deletes = changes.deletes.len(), "catalog applied");
        self.reload_catalog().await?;
        Ok(())
    }

    /// Fills a store that never held a model with `documents` (the built-in catalog, or the
    /// operator's file), each checked, then reads the store into the catalog in effect.
    ///
    /// # Errors
    /// [`CatalogAdminError::Invalid`] with `param` `models[i]…` for a faulty document;
    /// [`CatalogAdminError::Store`].
    pub async fn seed_catalog(&self, documents: Vec<ModelDocument>) -> Result<(), CatalogAdminError> {
        let plan = self.checked(documents)?;
        let documents: Vec<_> =
            plan.into_iter().map(|m| (m.id.clone(), ModelDocument { id: None, ..m.document() })).collect();
        if self.ports.catalog.seed_models(&documents).await? {
            tracing::info!(models = documents.len(), "the catalog store held no model: the initial catalog was stored");
        }
        self.reload_catalog().await?;
        Ok(())
    }

    /// Each document checked, by its own id, as the whole of a catalog.
    fn checked(&self, documents: Vec<ModelDocument>) -> Result<Vec<Model>, InvalidRequest> {
        let mut models: Vec<Model> = Vec::with_capacity(documents.len());
        for (index, document) in documents.into_iter().enumerate() {
            let at = format!("models[{index}]");
            let id = document
                .id
                .clone()
                .ok_or_else(|| InvalidRequest::param(&format!("{at}.id"), "each model names its id"))?;
            if models.iter().any(|m| m.id.as_str() == id) {
                return Err(InvalidRequest::param(&format!("{at}.id"), format!("model {id} appears twice")));
            }
            let model = self.check_model(&id, document).map_err(|e| InvalidRequest {
                param: Some(e.param.map_or(at.clone(), |p| format!("{at}.{p}"))),
                message: e.message,
            })?;
            models.push(model);
        }
        Ok(models)
    }

    /// Reads the store into the catalog in effect. A stored document that no longer reads (a
    /// rule tightened since) is left out and logged, rather than taking the catalog down.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read; the catalog in effect stays.
    pub async fn reload_catalog(&self) -> Result<(), StoreError> {
        let stored = self.ports.catalog.list_models().await?;
        let version = stored.iter().map(|m| m.version).max().unwrap_or_default();
        let models = stored.into_iter().filter_map(|s| match Model::from_document(s.id.as_str(), s.document) {
            Ok(model) => Some((model, s.deleted)),
            Err(fault) => {
                tracing::error!(model = %s.id, %fault, "a stored model document is not valid; it is left out");
                None
            }
        });
        let catalog = Catalog::with_deleted(models, version).map_err(|e| StoreError::Internal(e.to_string()))?;
        self.catalog.replace(catalog);
        Ok(())
    }
}
