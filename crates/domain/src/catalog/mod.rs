//! The model catalog: data, not code, and the operator's to change while the service runs.
//!
//! Each model is one [`ModelDocument`] (its form, its price, its routes to providers); the
//! built-in ones are the files of `catalog/models/` at the workspace's top, loaded into an empty
//! catalog store at start. A [`Catalog`] is one snapshot of the store, checked; the service
//! keeps the current one in a [`LiveCatalog`] that every use case reads, and swaps it when the
//! store changes. How a model runs at a provider is its routes' data, which only that
//! provider's adapter reads.

mod cost;
mod document;
mod live;
mod model;
mod price;

use std::collections::HashSet;

pub use cost::{Billing, Cost, CostUnit, ProviderBill};
pub use document::{DocumentFault, Field, FieldKind, FieldOption, ModelDocument, Route, read_at_path};
pub use live::LiveCatalog;
pub use model::{DurationRange, MAX_MODEL_ID_CHARS, Model};
pub use price::{Price, PricePercent, Rate, Unit};

use crate::modality::Modality;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_models.rs"));
}

/// A catalog that cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A document is not of the catalog's shape, or is inconsistent.
    #[error("catalog model {model}: {fault}")]
    Document {
        /// The model (or file) at fault.
        model: String,
        /// What is wrong, and where.
        fault: DocumentFault,
    },
    /// Two documents have the same id.
    #[error("catalog model {0} appears twice")]
    Duplicate(String),
}

/// One entry of a catalog snapshot: a model, and whether it was deleted (its jobs still run).
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    model: Model,
    deleted: bool,
}

/// One snapshot of the models: those offered, those disabled, and those deleted while jobs of
/// theirs may still run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    version: u64,
}

impl Catalog {
    /// The catalog shipped with genjobs (`catalog/models/*.json`).
    ///
    /// ```
    /// use genjobs_domain::catalog::Catalog;
    /// use genjobs_domain::modality::Modality;
    ///
    /// let catalog = Catalog::builtin()?;
    /// let video = catalog.model("seedance-2.0-fast").expect("a spec model");
    /// assert_eq!(video.modality, Modality::Video);
    /// assert!(catalog.models_of(Some(Modality::Image)).count() >= 3);
    /// # Ok::<(), genjobs_domain::catalog::CatalogError>(())
    /// ```
    ///
    /// # Errors
    /// Only if a shipped file is broken, which a unit test rules out.
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::from_models(Catalog::builtin_models()?, 0)
    }

    /// The built-in documents, each with its id.
    ///
    /// # Errors
    /// [`CatalogError::Document`] naming the file of a broken document.
    pub fn builtin_documents() -> Result<Vec<ModelDocument>, CatalogError> {
        Ok(Catalog::builtin_models()?.iter().map(Model::document).collect())
    }

    /// The built-in models, each from its file.
    ///
    /// # Errors
    /// [`CatalogError::Document`] naming the file of a broken document.
    pub fn builtin_models() -> Result<Vec<Model>, CatalogError> {
        builtin::BUILTIN
            .iter()
            .map(|(file, text)| {
                let fail = |fault| CatalogError::Document { model: (*file).to_owned(), fault };
                let value = serde_json::from_str(text).map_err(|e| fail(DocumentFault::at("", e.to_string())))?;
                let document = ModelDocument::from_value(value).map_err(fail)?;
                let id = document.id.clone().unwrap_or_default();
                Model::from_document(&id, document).map_err(fail)
            })
            .collect()
    }

    /// A snapshot of live models at a store version.
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`] for an id given twice.
    pub fn from_models(models: Vec<Model>, version: u64) -> Result<Catalog, CatalogError> {
        Catalog::with_deleted(models.into_iter().map(|m| (m, false)), version)
    }

    /// A snapshot of models, each marked deleted or not, at a store version.
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`] for an id given twice.
    pub fn with_deleted(
        models: impl IntoIterator<Item = (Model, bool)>,
        version: u64,
    ) -> Result<Catalog, CatalogError> {
        let mut seen = HashSet::new();
        let mut entries = Vec::new();
        for (model, deleted) in models {
            if !seen.insert(model.id.clone()) {
                return Err(CatalogError::Duplicate(model.id.to_string()));
            }
            entries.push(Entry { model, deleted });
        }
        Ok(Catalog { entries, version })
    }

    /// The store version this snapshot was read at.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The model with this id, if clients may use it (not disabled, not deleted).
    #[must_use]
    pub fn model(&self, id: &str) -> Option<&Model> {
        self.any_model(id).filter(|m| m.enabled && !self.is_deleted(id))
    }

    /// The model with this id, even disabled or deleted: what a job accepted for it runs on.
    #[must_use]
    pub fn any_model(&self, id: &str) -> Option<&Model> {
        self.entries.iter().map(|e| &e.model).find(|m| m.id.as_str() == id)
    }

    fn is_deleted(&self, id: &str) -> bool {
        self.entries.iter().any(|e| e.deleted && e.model.id.as_str() == id)
    }

    /// The models clients may use, of one modality or all of them, in listing order.
    pub fn models_of(&self, modality: Option<Modality>) -> impl Iterator<Item = &Model> {
        self.entries
            .iter()
            .filter(|e| !e.deleted && e.model.enabled)
            .map(|e| &e.model)
            .filter(move |m| modality.is_none_or(|wanted| m.modality == wanted))
    }

    /// Every model not deleted, disabled ones included: what the operator manages.
    pub fn managed(&self) -> impl Iterator<Item = &Model> {
        self.entries.iter().filter(|e| !e.deleted).map(|e| &e.model)
    }
}

/// A catalog file, as `genjobs models export` writes it and `genjobs models apply` (or
/// `GENJOBS_MODELS`) reads it: `{"models": [document, …]}`, each document with its `id`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    /// The documents, in listing order.
    pub models: Vec<ModelDocument>,
}

impl CatalogFile {
    /// Reads a catalog file, naming the JSON path of the first fault of shape.
    ///
    /// # Errors
    /// [`DocumentFault`] at its path (`models[2].price.credits`).
    pub fn read(text: &str) -> Result<CatalogFile, DocumentFault> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| DocumentFault::at("", format!("not JSON: {e}")))?;
        let Some(models) = value.get("models").and_then(serde_json::Value::as_array) else {
            return Err(DocumentFault::at("models", "a catalog file is {\"models\": [document, …]}"));
        };
        let models = models
            .iter()
            .enumerate()
            .map(|(i, document)| {
                ModelDocument::from_value(document.clone()).map_err(|fault| fault.under(&format!("models[{i}]")))
            })
            .collect::<Result<_, _>>()?;
        Ok(CatalogFile { models })
    }

    /// The file as pretty JSON, ending with a newline.
    #[must_use]
    pub fn write(&self) -> String {
        serde_json::to_string_pretty(self).map(|text| text + "\n").unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
