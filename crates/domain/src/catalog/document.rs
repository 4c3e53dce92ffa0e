//! A model document: everything about one model as the operator writes it (its form, its price,
//! its routes to providers), read with the JSON path of the first fault. A route is the
//! provider's own data, kept opaque here: each provider adapter reads and checks its own.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::cost::Cost;
use super::price::Price;
use crate::modality::Modality;

/// One form field of a model, as the models endpoint shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// camelCase name of the body key (`aspectRatio` for `aspect_ratio`).
    pub name: String,
    /// Label key for display.
    pub label: String,
    /// One of `text`, `textarea`, `number`, `select`, `image-url`.
    pub kind: FieldKind,
    /// Whether the client must fill it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Hint text for an empty field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// The value used when the client sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Choices of a `select` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<FieldOption>>,
    /// Lower bound of a `number` field (kept as written: `4`, not `4.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<serde_json::Number>,
    /// Upper bound of a `number` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<serde_json::Number>,
}

/// How a client draws a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FieldKind {
    /// One line of text.
    Text,
    /// Several lines of text.
    Textarea,
    /// A number within `min` and `max`.
    Number,
    /// One of `options`.
    Select,
    /// A URL of an image.
    ImageUrl,
}

/// A choice of a `select` field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldOption {
    /// The value sent in the body.
    pub value: String,
    /// Label key for display.
    pub label: String,
}

/// One way to run a model: the provider's name and the provider's own data (endpoints, the
/// mapping of body fields to its parameters, what `extra` may not set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// The name of the provider adapter that reads this route ([`crate::ports::UpstreamProvider::name`]).
    pub provider: String,
    /// What the provider bills the operator per unit, when the operator says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// Everything else, for that provider alone.
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

/// One model as the operator writes it: the admin API's body, a file of the built-in catalog,
/// an element of `genjobs models export`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelDocument {
    /// The id clients pass as `model`; in a file or an export, not in the admin API's body
    /// (the path names it there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What it produces: `image` or `video`.
    pub modality: Modality,
    /// Human-readable name.
    pub display_name: String,
    /// What a client should know when choosing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Form fields, in display order. The aspect ratios, resolutions and durations the model
    /// takes are those of its `aspectRatio`, `resolution` and `durationSec` fields.
    #[serde(default)]
    pub fields: Vec<Field>,
    /// What it costs.
    pub price: Price,
    /// Where it runs, in order of preference.
    pub routes: Vec<Route>,
    /// Whether clients may use it; a disabled model is kept but neither listed nor accepted.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// How long a run usually takes, to estimate progress when the provider reports none;
    /// a default by modality when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typical_run_secs: Option<u32>,
    /// Whether its jobs spill over to the next route whose provider has a free slot rather than
    /// wait behind a cap, unless a request says otherwise ([`crate::routing`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spill: bool,
    /// Whether its jobs are checked by the moderation service before they are sent, when one is
    /// configured; `false` skips the check for this model.
    #[serde(default = "enabled_by_default", skip_serializing_if = "is_true")]
    pub moderate: bool,
}

fn enabled_by_default() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

/// What is wrong with a document, and where: `param` is the JSON path of the fault
/// (`price.credits`, `routes[0].endpoint`, `fields[2].default`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct DocumentFault {
    /// JSON path of the fault within the document.
    pub path: String,
    /// What is wrong, for a human.
    pub message: String,
}

impl DocumentFault {
    /// A fault at `path`.
    #[must_use]
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }

    /// The same fault, under `prefix` (`routes[1]` + `endpoint` = `routes[1].endpoint`).
    #[must_use]
    pub fn under(self, prefix: &str) -> Self {
        let path = if self.path.is_empty() {
            prefix.to_owned()
        } else if self.path.starts_with('[') {
            format!("{prefix}{}", self.path)
        } else {
            format!("{prefix}.{}", self.path)
        };
        Self { path, ..self }
    }
}

/// Reads any part of a document (a provider reads its route data this way), naming the JSON
/// path of the first value that does not fit; a missing field is named by its own path
/// (`price.credits`), not its parent's.
///
/// # Errors
/// [`DocumentFault`] at that path.
pub fn read_at_path<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, DocumentFault> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let mut path = error.path().to_string();
        let message = error.inner().to_string();
        if let Some(missing) = message.strip_prefix("missing field `").and_then(|rest| rest.split('`').next()) {
            path = if path == "." { missing.to_owned() } else { format!("{path}.{missing}") };
        }
        if path == "." {
            path.clear();
        }
        DocumentFault { path, message }
    })
}

impl ModelDocument {
    /// Reads a document, naming the JSON path of the first fault of shape.
    ///
    /// # Errors
    /// [`DocumentFault`] at the path of the value that does not fit: a missing field is named
    /// by its own path (`price.credits`), not its parent's.
    pub fn from_value(value: Value) -> Result<Self, DocumentFault> {
        read_at_path(value)
    }

    /// The document as JSON.
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
