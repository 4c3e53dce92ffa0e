//! The models listing: each model and the form fields a client draws for it.

use genjobs_domain::catalog::{Field, FieldKind, FieldOption, Model};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::schemas::{field_kind_schema, modality_schema};

/// A model of the listing.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Model)]
pub struct ModelView<'a> {
    id: &'a str,
    #[schema(schema_with = modality_schema)]
    modality: &'static str,
    display_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    upstream: &'static str,
    fields: Vec<FieldView<'a>>,
}

/// A form field of a model, as the spec describes it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ModelField)]
pub struct FieldView<'a> {
    name: &'a str,
    label: &'a str,
    #[schema(schema_with = field_kind_schema)]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    required: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    placeholder: Option<&'a str>,
    #[schema(value_type = Option<Value>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Vec<FieldOptionView<'a>>>,
    #[schema(value_type = Option<f64>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<&'a serde_json::Number>,
    #[schema(value_type = Option<f64>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<&'a serde_json::Number>,
}

/// A choice of a `select` field: `{value, label}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = FieldOption)]
pub struct FieldOptionView<'a> {
    value: &'a str,
    label: &'a str,
}

impl<'a> From<&'a FieldOption> for FieldOptionView<'a> {
    fn from(o: &'a FieldOption) -> Self {
        Self { value: &o.value, label: &o.label }
    }
}

fn field_kind(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::Text => "text",
        FieldKind::Textarea => "textarea",
        FieldKind::Number => "number",
        FieldKind::Select => "select",
        FieldKind::ImageUrl => "image-url",
    }
}

impl<'a> From<&'a Field> for FieldView<'a> {
    fn from(f: &'a Field) -> Self {
        Self {
            name: &f.name,
            label: &f.label,
            kind: field_kind(f.kind),
            required: f.required,
            placeholder: f.placeholder.as_deref(),
            default: f.default.as_ref(),
            options: f.options.as_ref().map(|o| o.iter().map(FieldOptionView::from).collect()),
            min: f.min.as_ref(),
            max: f.max.as_ref(),
        }
    }
}

impl<'a> ModelView<'a> {
    /// The view of `m`, run by the provider named `upstream`.
    #[must_use]
    pub fn new(m: &'a Model, upstream: &'static str) -> Self {
        Self {
            id: m.id.as_str(),
            modality: m.modality.as_str(),
            display_name: &m.display_name,
            description: m.description.as_deref(),
            upstream,
            fields: m.fields.iter().map(FieldView::from).collect(),
        }
    }
}
