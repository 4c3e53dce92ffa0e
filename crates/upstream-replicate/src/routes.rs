//! A model's Replicate route: which official model serves it and how the catalog's body fields
//! become that model's input keys. The route is data in the model's document:
//!
//! ```json
//! {"provider": "replicate", "model": "black-forest-labs/flux-1.1-pro-ultra",
//!  "params": {"prompt": "prompt", "aspect_ratio": "aspect_ratio", "seed": "seed"},
//!  "image_inputs": {"to": "image_prompt", "list": false},
//!  "fixed": {"output_format": "png"}}
//! ```
//!
//! `params` maps our body fields (snake_case) to input keys, as a fal route's do (Replicate's
//! aspect ratios are written as ours, so no translation is needed); `image_inputs` says where
//! reference images go; `fixed` sets input keys to constant values (PNG outputs, as fal gives);
//! `extra_refused` lists more keys `extra` may not set. [`ReplicateSchemas`] checks a route
//! against the model schemas the adapter holds ([`crate::schema`]) when an operator puts it.

use std::collections::BTreeMap;

use genjobs_domain::catalog::{DocumentFault, Model, Route, read_at_path};
use genjobs_domain::input::{GenerationInput, MAPPABLE_FIELDS};
use genjobs_domain::ports::RouteSchemas;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::schema::{self, ModelSchema};

/// The provider name routes give to run on Replicate.
pub const PROVIDER: &str = "replicate";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageInputs {
    to: String,
    list: bool,
}

/// A Replicate route as a model's document gives it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicateRoute {
    /// The official model, `owner/name`.
    model: String,
    /// Our body field (snake_case) to the model's input key; fields not listed are not sent.
    params: BTreeMap<String, String>,
    /// Where reference images go; a request with images is refused without it.
    #[serde(default)]
    image_inputs: Option<ImageInputs>,
    /// Input keys sent with the same value on every prediction.
    #[serde(default)]
    fixed: Map<String, Value>,
    /// Input keys `extra` may not set besides those the route sets.
    #[serde(default)]
    extra_refused: Vec<String>,
}

/// Why a request cannot be expressed for Replicate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The model has no Replicate route.
    #[error("model {0} has no replicate route")]
    UnknownModel(String),
    /// The model's Replicate route does not read.
    #[error("the model's replicate route is not valid: {0}")]
    Malformed(String),
    /// More outputs than one prediction of the model makes.
    #[error("{model} makes one image per prediction on replicate; n = {n} cannot be sent there")]
    OneOutput {
        /// The Replicate model.
        model: String,
        /// The outputs asked for.
        n: u8,
    },
    /// The route takes no reference images.
    #[error("model {model} takes no image inputs on replicate")]
    NoImages {
        /// Our model.
        model: String,
    },
}

/// A prediction to create: the official model and its input.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicateRequest {
    /// `owner/name`.
    pub model: String,
    /// The `input` object.
    pub input: Map<String, Value>,
}

impl ReplicateRoute {
    /// Reads a route's Replicate data.
    ///
    /// # Errors
    /// [`DocumentFault`] at the path, within the route, of what does not fit.
    pub fn read(route: &Route) -> Result<ReplicateRoute, DocumentFault> {
        read_at_path(Value::Object(route.data.clone()))
    }

    /// The first Replicate route of `model`.
    ///
    /// # Errors
    /// [`RouteError::UnknownModel`] when it has none, [`RouteError::Malformed`] when it does
    /// not read.
    pub fn of(model: &Model) -> Result<ReplicateRoute, RouteError> {
        let (_, route) =
            model.routes_of(PROVIDER).next().ok_or_else(|| RouteError::UnknownModel(model.id.to_string()))?;
        ReplicateRoute::read(route).map_err(|fault| RouteError::Malformed(fault.to_string()))
    }

    /// The input keys the route itself sets.
    fn sets(&self, key: &str) -> bool {
        self.params.values().any(|to| to == key)
            || self.image_inputs.as_ref().is_some_and(|images| images.to == key)
            || self.fixed.contains_key(key)
    }

    /// Whether `extra` may not set `key`: one the route sets, or one it refuses. A key the model's
    /// schema does not take is not refused but left out of the prediction ([`Self::request`]):
    /// it may be meant for another route of the same model.
    fn refuses(&self, key: &str) -> bool {
        self.sets(key) || self.extra_refused.iter().any(|refused| refused == key)
    }

    /// Checks the route against the model's schema: the model known, every mapped or fixed key
    /// taken (a fixed value valid), our aspect ratios among the model's, every required key set.
    ///
    /// # Errors
    /// [`DocumentFault`] at the path, within the route, of the first fault.
    pub fn check(&self, model: &Model) -> Result<(), DocumentFault> {
        let schema = schema::model(&self.model).ok_or_else(|| {
            DocumentFault::at(
                "model",
                format!("replicate has no official model {:?} that this service knows", self.model),
            )
        })?;
        let takes = |key: &str| schema.input.properties.get(key);
        for (field, to) in &self.params {
            let at = format!("params.{field}");
            if !MAPPABLE_FIELDS.contains(&field.as_str()) {
                return Err(DocumentFault::at(at, format!("no body field is named {field:?}")));
            }
            let property =
                takes(to).ok_or_else(|| DocumentFault::at(&at, format!("{} takes no input {to:?}", self.model)))?;
            if field == "aspect_ratio"
                && let Some(ratio) =
                    model.aspect_ratios.iter().find(|r| property.check(to, &Value::String((*r).clone())).is_some())
            {
                return Err(DocumentFault::at(at, format!("{} takes no aspect ratio {ratio:?}", self.model)));
            }
        }
        if let Some(images) = &self.image_inputs
            && takes(&images.to).is_none()
        {
            return Err(DocumentFault::at("image_inputs.to", format!("{} takes no input {:?}", self.model, images.to)));
        }
        for (key, value) in &self.fixed {
            let at = format!("fixed.{key}");
            let property =
                takes(key).ok_or_else(|| DocumentFault::at(&at, format!("{} takes no input {key:?}", self.model)))?;
            if let Some(fault) = property.check(key, value) {
                return Err(DocumentFault::at(at, fault.description));
            }
            if self.params.values().any(|to| to == key) {
                return Err(DocumentFault::at(at, format!("{key:?} is also mapped from a body field")));
            }
        }
        if let Some(missing) = schema.input.required.iter().find(|key| !self.sets(key)) {
            return Err(DocumentFault::at("params", format!("{} requires the input {missing:?}", self.model)));
        }
        Ok(())
    }

    /// The prediction for `input`: our fields under the model's keys, the fixed keys, then the keys
    /// of `extra` that the model's schema takes (it was checked by [`refused_extra_key`] before;
    /// the contract sends Replicate nothing its published schema does not take).
    ///
    /// # Errors
    /// [`RouteError`] when `n` asks more than one prediction makes, or images come to a route
    /// that takes none.
    pub fn request(&self, model: &Model, input: &GenerationInput) -> Result<ReplicateRequest, RouteError> {
        let mapped = |field: &str| self.params.get(field);
        if let Some(n) = input.n.filter(|n| *n > 1 && mapped("n").is_none()) {
            return Err(RouteError::OneOutput { model: self.model.clone(), n });
        }
        let mut body = Map::new();
        for (field, value) in input.mappable_fields() {
            if let (Some(value), Some(to)) = (value, mapped(field)) {
                body.insert(to.clone(), value);
            }
        }
        if !input.image_inputs.is_empty() {
            let images =
                self.image_inputs.as_ref().ok_or_else(|| RouteError::NoImages { model: model.id.to_string() })?;
            body.extend(input.image_inputs_value(images.list).map(|value| (images.to.clone(), value)));
        }
        body.extend(self.fixed.clone());
        if let Some(extra) = &input.extra {
            let takes = |key: &str| self.schema().is_some_and(|schema| schema.input.properties.contains_key(key));
            body.extend(extra.iter().filter(|(key, _)| takes(key)).map(|(key, value)| (key.clone(), value.clone())));
        }
        Ok(ReplicateRequest { model: self.model.clone(), input: body })
    }

    /// The model's schema, when the adapter holds it.
    #[must_use]
    pub fn schema(&self) -> Option<&'static ModelSchema> {
        schema::model(&self.model)
    }
}

/// The Replicate adapter's knowledge of its models, for checking routes as models are put.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplicateSchemas;

impl RouteSchemas for ReplicateSchemas {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn check_route(&self, model: &Model, route: &Route) -> Result<(), DocumentFault> {
        ReplicateRoute::read(route)?.check(model)
    }
}

/// The first key of `extra` (in key order) that a request to `model` may not set on Replicate:
/// an input key the route sets, or one it lists in `extra_refused`. No input of
/// flux-1.1-pro-ultra changes its price (one image per prediction, priced per image), so nothing
/// else is refused there; keys its schema does not take are left out of the prediction. `None` when every key passes, or when the model
/// has no Replicate route (submitting it fails anyway).
#[must_use]
pub fn refused_extra_key<'e>(model: &Model, extra: &'e Map<String, Value>) -> Option<&'e str> {
    let route = ReplicateRoute::of(model).ok()?;
    extra.keys().map(String::as_str).find(|key| route.refuses(key))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use genjobs_domain::catalog::{Catalog, ModelDocument};
    use serde_json::json;

    use super::*;

    /// flux-pro of the built-in catalog, with a Replicate route (changed by `change`) first.
    fn flux(change: impl FnOnce(&mut Value)) -> Model {
        let catalog = Catalog::builtin().unwrap();
        let mut document = serde_json::to_value(catalog.model("flux-pro").unwrap().document()).unwrap();
        let mut route = json!({"provider": "replicate", "model": "black-forest-labs/flux-1.1-pro-ultra",
            "params": {"prompt": "prompt", "aspect_ratio": "aspect_ratio", "seed": "seed"},
            "image_inputs": {"to": "image_prompt", "list": false}, "fixed": {"output_format": "png"}});
        change(&mut route);
        document["routes"].as_array_mut().unwrap().insert(0, route);
        Model::from_document("flux-pro", ModelDocument::from_value(document).unwrap()).unwrap()
    }

    fn check(model: &Model) -> Result<(), DocumentFault> {
        ReplicateSchemas.check_route(model, &model.routes[0])
    }

    fn input() -> GenerationInput {
        GenerationInput {
            prompt: "a fox".into(),
            negative_prompt: Some("blur".into()),
            aspect_ratio: "16:9".into(),
            resolution: None,
            duration_sec: None,
            n: Some(1),
            seed: Some(7),
            image_inputs: vec!["https://a/1.png".into(), "https://a/2.png".into()],
            extra: json!({"raw": true}).as_object().cloned(),
        }
    }

    #[test]
    fn the_flux_route_passes_and_maps_the_body() {
        let model = flux(|_| {});
        assert_eq!(check(&model), Ok(()));
        let request = ReplicateRoute::of(&model).unwrap().request(&model, &input()).unwrap();
        assert_eq!(request.model, "black-forest-labs/flux-1.1-pro-ultra");
        assert_eq!(
            Value::Object(request.input.clone()),
            json!({"prompt": "a fox", "aspect_ratio": "16:9", "seed": 7, "image_prompt": "https://a/1.png",
                "output_format": "png", "raw": true})
        );
        let schema = ReplicateRoute::of(&model).unwrap().schema().unwrap();
        assert_eq!(schema.validate_keys(&request.input), Ok(()), "what the route sends, the model takes");
    }

    #[test]
    fn more_than_one_image_cannot_go_to_a_model_that_makes_one() {
        let model = flux(|_| {});
        let route = ReplicateRoute::of(&model).unwrap();
        let four = GenerationInput { n: Some(4), ..input() };
        assert_eq!(
            route.request(&model, &four),
            Err(RouteError::OneOutput { model: "black-forest-labs/flux-1.1-pro-ultra".into(), n: 4 })
        );
        let no_images = flux(|r| {
            r.as_object_mut().unwrap().remove("image_inputs");
        });
        let refused = ReplicateRoute::of(&no_images).unwrap().request(&no_images, &input());
        assert!(matches!(refused, Err(RouteError::NoImages { .. })));
    }

    #[test]
    fn a_route_is_checked_against_the_model_schema() {
        let path = |change: fn(&mut Value)| check(&flux(change)).unwrap_err().path;
        assert_eq!(path(|r| r["model"] = json!("black-forest-labs/flux-nope")), "model");
        assert_eq!(path(|r| r["params"]["seed"] = json!("random_seed")), "params.seed");
        assert_eq!(path(|r| r["params"]["style"] = json!("style")), "params.style");
        assert_eq!(path(|r| r["params"]["n"] = json!("num_outputs")), "params.n");
        assert_eq!(path(|r| r["image_inputs"]["to"] = json!("image")), "image_inputs.to");
        assert_eq!(path(|r| r["fixed"]["output_format"] = json!("webp")), "fixed.output_format");
        assert_eq!(path(|r| r["fixed"]["num_outputs"] = json!(2)), "fixed.num_outputs");
        assert_eq!(path(|r| r["fixed"]["seed"] = json!(2)), "fixed.seed");
        assert_eq!(path(|r| r["params"] = json!({"seed": "seed"})), "params");
        assert_eq!(path(|r| r["endpoint"] = json!("x")), "endpoint");
        let fault = check(&flux(|r| r["params"]["negative_prompt"] = json!("negative_prompt"))).unwrap_err();
        assert!(fault.message.contains("\"negative_prompt\""), "{}", fault.message);
    }

    #[test]
    fn an_aspect_ratio_the_model_does_not_take_is_a_fault() {
        let mut model = flux(|_| {});
        model.aspect_ratios.push("2:1".into());
        let fault = check(&model).unwrap_err();
        assert_eq!((fault.path.as_str(), fault.message.contains("2:1")), ("params.aspect_ratio", true));
    }

    #[test]
    fn extra_may_not_set_what_the_route_sets_and_what_the_model_does_not_take_is_left_out() {
        let model = flux(|r| r["extra_refused"] = json!(["raw"]));
        let refused = |extra: Value| refused_extra_key(&model, extra.as_object().unwrap()).map(str::to_owned);
        assert_eq!(refused(json!({"safety_tolerance": 5, "image_prompt_strength": 0.3})), None);
        assert_eq!(refused(json!({"seed": 1})).as_deref(), Some("seed"));
        assert_eq!(refused(json!({"image_prompt": "https://a/b.png"})).as_deref(), Some("image_prompt"));
        assert_eq!(refused(json!({"output_format": "jpg"})).as_deref(), Some("output_format"));
        assert_eq!(refused(json!({"num_outputs": 4})), None);
        assert_eq!(refused(json!({"raw": true})).as_deref(), Some("raw"));
        let extra = json!({"num_outputs": 4, "safety_tolerance": 5}).as_object().cloned();
        let sent = ReplicateRoute::of(&model).unwrap().request(&model, &GenerationInput { extra, ..input() }).unwrap();
        assert_eq!((sent.input.get("num_outputs"), sent.input.get("safety_tolerance")), (None, Some(&json!(5))));
        let fal_only = Catalog::builtin().unwrap().model("flux-pro").unwrap().clone();
        assert_eq!(refused_extra_key(&fal_only, json!({"x": 1}).as_object().unwrap()), None);
    }
}
