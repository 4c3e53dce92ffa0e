//! The admin API's model documents: `AdminModel` as `GET /api/admin/models` shows it (the public
//! model plus its description, price, routes and whether it is enabled) and as `PUT` reads it.

use genjobs_domain::catalog::{Model, ModelDocument, Unit};
use genjobs_domain::request::InvalidRequest;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::models::ModelView;

/// A model as the operator manages it. In a `PUT` body, `id` and `upstream` are left out (the
/// path names the model; the routes name the providers).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AdminModel)]
pub struct AdminModelView<'a> {
    #[serde(flatten)]
    model: ModelView<'a>,
    price: PriceView<'a>,
    /// Where the model runs, in order of preference: each names its `provider`; the rest is
    /// that provider's own data (for fal: `endpoint`, `variants`, `params`, `image_inputs`,
    /// `extra_refused`).
    #[schema(value_type = Vec<Object>)]
    routes: Vec<Value>,
    /// Whether clients may use it; a disabled model is neither listed nor accepted.
    enabled: bool,
    /// How long a run usually takes, in seconds, to estimate progress.
    typical_run_secs: u32,
}

/// `{"per": "image"|"second", "credits": N, "by_resolution"?: {"<resolution>": N}}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Price)]
pub struct PriceView<'a> {
    /// `image` or `second`.
    #[schema(value_type = String, example = "image")]
    per: &'static str,
    /// Credits per image, or per second of video.
    credits: u64,
    /// Credits per second at the resolutions named, instead of `credits`.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schema(value_type = Option<std::collections::BTreeMap<String, u64>>)]
    by_resolution: &'a std::collections::BTreeMap<String, u64>,
}

impl<'a> AdminModelView<'a> {
    /// The view of `m`, run by the provider named `upstream`.
    #[must_use]
    pub fn new(m: &'a Model, upstream: &'static str) -> Self {
        Self {
            model: ModelView::new(m, upstream),
            price: PriceView {
                per: match m.price.per {
                    Unit::Image => "image",
                    Unit::Second => "second",
                },
                credits: m.price.credits,
                by_resolution: &m.price.by_resolution,
            },
            routes: m.routes.iter().map(|r| serde_json::to_value(r).unwrap_or(Value::Null)).collect(),
            enabled: m.enabled,
            typical_run_secs: m.typical_run_secs,
        }
    }
}

/// Reads a `PUT /api/admin/models/{id}` body into a model document.
///
/// # Errors
/// [`InvalidRequest`] whose `param` is the JSON path of the first fault.
pub fn model_document(mut body: Value) -> Result<ModelDocument, InvalidRequest> {
    let Some(fields) = body.as_object_mut() else {
        return Err(InvalidRequest::body("the body must be a JSON object"));
    };
    // What a GET shows and a PUT does not take: the path names the model, the routes name
    // their providers. Leaving them out lets an operator PUT back what they read.
    fields.remove("id");
    fields.remove("upstream");
    ModelDocument::from_value(body).map_err(InvalidRequest::from)
}
