//! The models listing's views: each model and the form fields a client draws for it.

use genjobs_api::{Field, FieldOption, Model};
use genjobs_domain::catalog::{self, FieldKind};

fn field_kind(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::Text => "text",
        FieldKind::Textarea => "textarea",
        FieldKind::Number => "number",
        FieldKind::Select => "select",
        FieldKind::ImageUrl => "image-url",
    }
}

fn field_view(f: &catalog::Field) -> Field {
    Field {
        name: f.name.clone(),
        label: f.label.clone(),
        kind: field_kind(f.kind).to_owned(),
        required: f.required,
        placeholder: f.placeholder.clone(),
        default: f.default.clone(),
        options: f.options.as_ref().map(|options| {
            options.iter().map(|o| FieldOption { value: o.value.clone(), label: o.label.clone() }).collect()
        }),
        min: f.min.clone(),
        max: f.max.clone(),
    }
}

/// The view of `m`, run by the provider named `upstream`.
#[must_use]
pub fn model_view(m: &catalog::Model, upstream: &str) -> Model {
    Model {
        id: m.id.to_string(),
        modality: m.modality.as_str().to_owned(),
        display_name: m.display_name.clone(),
        description: m.description.clone(),
        upstream: upstream.to_owned(),
        fields: m.fields.iter().map(field_view).collect(),
    }
}
