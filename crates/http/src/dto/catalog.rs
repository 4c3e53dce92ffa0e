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
        spill: m.spill,
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
    ModelDocument::from_value(body).map_err(|fault| {
        let message = match fault.message.strip_prefix("missing field ") {
            Some(_) => format!("`{}` is required", fault.path),
            None if fault.path.is_empty() => fault.message,
            None => super::wording::field_refusal(&fault.path, &fault.message),
        };
        InvalidRequest { param: Some(fault.path), message }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_refused_field_is_named_with_its_rule_in_the_apis_words() {
        let document = |price: Value| json!({"modality": "image", "display_name": "Fox", "price": price, "routes": [{"provider": "fal"}]});
        let refused = |body: Value| model_document(body).map(|_| ()).unwrap_err();
        let negative = refused(document(json!({"per": "image", "credits": -3})));
        assert_eq!(negative.param.as_deref(), Some("price.credits"));
        assert_eq!(negative.message, "`price.credits` must be a whole number (0 or more); got -3");
        let missing = refused(document(json!({"per": "image"})));
        assert_eq!(
            (missing.param.as_deref(), missing.message.as_str()),
            (Some("price.credits"), "`price.credits` is required")
        );
        let unit = refused(document(json!({"per": "minute", "credits": 1})));
        assert_eq!(unit.message, "`price.per` must be `image` or `second`; got `minute`");
    }
}
