//! The models listing: each model and the form fields a client draws for it; and a model as the
//! operator manages it (its price, routes and whether it is enabled).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};
use utoipa::ToSchema;

use crate::schemas::{field_kind_schema, modality_schema};

/// A model of the listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Model {
    /// Its id, the `model` of a request.
    pub id: String,
    /// What it produces.
    #[schema(schema_with = modality_schema)]
    pub modality: String,
    /// Its name for people.
    pub display_name: String,
    /// What a client should know when choosing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The provider that runs it.
    pub upstream: String,
    /// Its form, in display order.
    pub fields: Vec<Field>,
}

/// A form field of a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = ModelField)]
pub struct Field {
    /// The body's field (camelCase names map to snake_case).
    pub name: String,
    /// What to show.
    pub label: String,
    /// `text`, `textarea`, `number`, `select` or `image-url`.
    #[schema(schema_with = field_kind_schema)]
    pub kind: String,
    /// Whether it must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// A hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// The default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub default: Option<Value>,
    /// The choices of a `select`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<FieldOption>>,
    /// Lowest value of a `number`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<f64>)]
    pub min: Option<Number>,
    /// Highest value of a `number`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<f64>)]
    pub max: Option<Number>,
}

/// A choice of a `select` field: `{value, label}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FieldOption {
    /// What to send.
    pub value: String,
    /// What to show.
    pub label: String,
}

/// A model as the operator manages it. In a `PUT` body, `id` and `upstream` are left out (the
/// path names the model; the routes name the providers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdminModel {
    /// The model as the listing shows it.
    #[serde(flatten)]
    pub model: Model,
    /// What it costs.
    pub price: Price,
    /// Where the model runs, in order of preference: each names its `provider`; the rest is
    /// that provider's own data (for fal: `endpoint`, `variants`, `params`, `image_inputs`,
    /// `extra_refused`).
    #[schema(value_type = Vec<Object>)]
    pub routes: Vec<Value>,
    /// Whether clients may use it; a disabled model is neither listed nor accepted.
    pub enabled: bool,
    /// How long a run usually takes, in seconds, to estimate progress.
    pub typical_run_secs: u32,
    /// Whether its jobs spill over to the next route whose provider has a free slot rather than
    /// wait behind a cap (as a request's `provider.sort: "wait"`), unless a request says otherwise.
    #[serde(default)]
    pub spill: bool,
}

/// `{"per": "image"|"second", "credits": N, "by_resolution"?: {"<resolution>": N}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Price {
    /// `image` or `second`.
    #[schema(example = "image")]
    pub per: String,
    /// Credits per image, or per second of video.
    pub credits: u64,
    /// Credits per second at the resolutions named, instead of `credits`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = Option<BTreeMap<String, u64>>)]
    pub by_resolution: BTreeMap<String, u64>,
}
