//! The admin API's model documents: a model as an operator manages it (the public model plus its
//! description, price, routes and whether it is enabled), and the reading of a `PUT` body.

use genjobs_api::{AdminModel, Price};
use genjobs_domain::catalog::{Model, ModelDocument, Unit};
use genjobs_domain::invalid::InvalidRequest;
use serde_json::Value;

use super::models::model_view;

/// The view of `m`, run by the provider named `upstream`.
#[must_use]
pub fn admin_model_view(m: &Model, upstream: &str) -> AdminModel {
    AdminModel {
        model: model_view(m, upstream),
        price: Price {
            per: match m.price.per {
                Unit::Image => "image",
                Unit::Second => "second",
            }
            .to_owned(),
            credits: m.price.credits,
            by_resolution: m.price.by_resolution.clone(),
        },
        routes: m.routes.iter().map(|r| serde_json::to_value(r).unwrap_or(Value::Null)).collect(),
        enabled: m.enabled,
        typical_run_secs: m.typical_run_secs,
    }
}

/// Reads a `PUT /api/admin/models/{id}` body into a model document. The document is the
/// catalog's own format (that of catalog files and `genjobs models export`), which the domain
/// reads with serde, naming the JSON path of a fault.
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
