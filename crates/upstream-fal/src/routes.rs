//! A model's fal route: which fal endpoint serves a request, and the body it takes (parameter
//! names, value translations such as seconds as a string or an aspect ratio as an
//! `image_size` preset, how reference images are passed). The route is data in the model's
//! document (`{"provider": "fal", "endpoint": …, "variants": […], "params": {…}, …}`); this
//! module reads it, and checks it against fal's endpoint schemas ([`crate::schema`]) when an
//! operator puts a model.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use genjobs_domain::catalog::{DocumentFault, Model, Route, read_at_path};
use genjobs_domain::ids::ModelId;
use genjobs_domain::input::{GenerationInput, MAPPABLE_FIELDS};
use genjobs_domain::ports::RouteSchemas;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::schema;

/// The provider name routes give to run on fal.
pub const PROVIDER: &str = "fal";

/// How a value is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Translation {
    /// As a JSON string (`"duration": "5"`).
    String,
    /// An aspect ratio as one of fal's `image_size` presets.
    ImageSize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Param {
    Name(String),
    Translated {
        to: String,
        #[serde(rename = "as")]
        translation: Translation,
    },
}

impl Param {
    fn to(&self) -> &str {
        match self {
            Param::Name(to) | Param::Translated { to, .. } => to,
        }
    }

    fn convert(&self, value: Value) -> Option<Value> {
        match (self, &value) {
            (Param::Translated { translation: Translation::String, .. }, Value::Number(n)) => {
                Some(Value::String(n.to_string()))
            }
            (Param::Translated { translation: Translation::ImageSize, .. }, Value::String(ratio)) => {
                image_size(ratio).map(|preset| Value::String(preset.to_owned()))
            }
            _ => Some(value),
        }
    }
}

/// fal's `image_size` preset for one of our aspect ratios.
fn image_size(ratio: &str) -> Option<&'static str> {
    Some(match ratio {
        "1:1" => "square_hd",
        "16:9" => "landscape_16_9",
        "9:16" => "portrait_16_9",
        "4:3" => "landscape_4_3",
        "3:4" => "portrait_4_3",
        _ => return None,
    })
}

/// An endpoint that serves some requests of the route instead of its main one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Variant {
    /// The resolution it serves; any when absent.
    #[serde(default)]
    resolution: Option<String>,
    /// Whether it serves requests with image inputs (`true`) or without (`false`); both when
    /// absent.
    #[serde(default)]
    images: Option<bool>,
    endpoint: String,
    /// Our fields this endpoint does not take, although the route's others do.
    #[serde(default)]
    without: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageInputs {
    to: String,
    list: bool,
}

/// A fal route as a model's document gives it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FalRoute {
    /// The endpoint of every request no variant serves.
    endpoint: String,
    /// Our fields the main endpoint does not take.
    #[serde(default)]
    without: Vec<String>,
    /// Endpoints for some resolutions, or for requests with (or without) images; the first
    /// that matches serves.
    #[serde(default)]
    variants: Vec<Variant>,
    /// Our body field (snake_case) to fal's parameter; fields not listed are not sent. Left out,
    /// the main endpoint's schema suggests it (`crate::draft::mapping`), as do `image_inputs` and
    /// `extra_refused`.
    #[serde(default)]
    params: Option<BTreeMap<String, Param>>,
    /// Where reference images go; none when neither given nor suggested.
    #[serde(default)]
    image_inputs: Option<ImageInputs>,
    /// fal parameters `extra` may not set besides the ones `params` and `image_inputs` derive:
    /// those the price depends on (the number of images, the duration, the resolution, a
    /// rendering tier), so that `extra` can never make fal produce more than was held.
    #[serde(default)]
    extra_refused: Option<Vec<String>>,
}

/// fal parameters `extra` may never set, on any route: `sync_mode` makes fal answer with the
/// outputs inline as `data:` URIs, megabytes each, which would land in job rows and answers.
const ADAPTER_REFUSED: [&str; 1] = ["sync_mode"];

impl FalRoute {
    /// Reads a route's fal data.
    ///
    /// # Errors
    /// [`DocumentFault`] at the path, within the route, of what does not fit.
    pub fn read(route: &Route) -> Result<FalRoute, DocumentFault> {
        let mut route: FalRoute = read_at_path(Value::Object(route.data.clone()))?;
        if let Some(endpoint) = schema::endpoint(&route.endpoint)
            && (route.params.is_none() || route.image_inputs.is_none() || route.extra_refused.is_none())
        {
            let suggested = crate::draft::mapping(endpoint);
            if route.params.is_none() {
                route.params = Some(read_at_path(Value::Object(suggested.params)).map_err(|f| f.under("params"))?);
            }
            if route.image_inputs.is_none() {
                route.image_inputs =
                    suggested.image_inputs.map(read_at_path).transpose().map_err(|f| f.under("image_inputs"))?;
            }
            if route.extra_refused.is_none() {
                route.extra_refused = Some(suggested.extra_refused);
            }
        }
        Ok(route)
    }

    /// The first fal route of `model`.
    ///
    /// # Errors
    /// [`RouteError::UnknownModel`] when it has none, [`RouteError::Malformed`] when it does
    /// not read.
    pub fn of(model: &Model) -> Result<FalRoute, RouteError> {
        Self::read_for_request(first_route(model)?)
    }

    /// [`FalRoute::read`], its fault told as a request's.
    fn read_for_request(route: &Route) -> Result<FalRoute, RouteError> {
        FalRoute::read(route).map_err(|fault| RouteError::Malformed(fault.to_string()))
    }

    /// Whether `extra` may not set the fal parameter `key`.
    fn refuses(&self, key: &str) -> bool {
        ADAPTER_REFUSED.contains(&key)
            || self.params.iter().flatten().any(|(_, param)| param.to() == key)
            || self.image_inputs.as_ref().is_some_and(|images| images.to == key)
            || self.extra_refused.iter().flatten().any(|refused| refused == key)
    }

    /// Every endpoint of the route, with the fields it does not take and its path in the route.
    fn endpoints(&self) -> impl Iterator<Item = (String, &str, &[String])> {
        std::iter::once(("endpoint".to_owned(), self.endpoint.as_str(), self.without.as_slice())).chain(
            self.variants
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("variants[{i}].endpoint"), v.endpoint.as_str(), v.without.as_slice())),
        )
    }

    /// Checks the route against fal's endpoint schemas: every endpoint known, every mapped
    /// parameter taken by each endpoint that is sent it, the image parameter taken somewhere.
    ///
    /// # Errors
    /// [`DocumentFault`] at the path, within the route, of the first fault.
    pub fn check(&self) -> Result<(), DocumentFault> {
        let mut known = Vec::new();
        for (path, id, without) in self.endpoints() {
            let endpoint = schema::endpoint(id).ok_or_else(|| {
                DocumentFault::at(path, format!("fal has no endpoint {id:?} that this service knows"))
            })?;
            known.push((id, endpoint, without));
        }
        for (field, param) in self.params.iter().flatten() {
            let at = format!("params.{field}");
            if !MAPPABLE_FIELDS.contains(&field.as_str()) {
                return Err(DocumentFault::at(at, format!("no body field is named {field:?}")));
            }
            let refusing = known
                .iter()
                .find(|(_, endpoint, without)| !without.contains(field) && !endpoint.input.contains_key(param.to()));
            if let Some((id, _, _)) = refusing {
                return Err(DocumentFault::at(at, format!("fal endpoint {id} takes no parameter {:?}", param.to())));
            }
        }
        if let Some(images) = &self.image_inputs
            && !known.iter().any(|(_, endpoint, _)| endpoint.input.contains_key(&images.to))
        {
            return Err(DocumentFault::at(
                "image_inputs.to",
                format!("no endpoint of the route takes a parameter {:?}", images.to),
            ));
        }
        Ok(())
    }
}

/// The fal adapter's knowledge of its endpoints, for checking routes as models are put.
#[derive(Debug, Clone, Copy, Default)]
pub struct FalSchemas;

impl RouteSchemas for FalSchemas {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn check_route(&self, _model: &Model, route: &Route) -> Result<(), DocumentFault> {
        FalRoute::read(route)?.check()
    }
}

/// The first key of `extra` (in key order) that a request to `model` may not set: a parameter
/// the adapter derives from a body field, or one the price depends on. `None` when every key
/// passes, or when the model has no fal route (submitting it fails anyway).
#[must_use]
pub fn refused_extra_key<'e>(model: &Model, extra: &'e Map<String, Value>) -> Option<&'e str> {
    FalRoute::of(model).ok()?.refused_extra_key(extra)
}

/// The first fal route of `model`, as its document has it.
fn first_route(model: &Model) -> Result<&Route, RouteError> {
    model
        .routes_of(PROVIDER)
        .next()
        .map(|(_, route)| route)
        .ok_or_else(|| RouteError::UnknownModel(model.id.to_string()))
}

/// Each model's fal route as last read. A route is data in the model's document, read (and
/// completed from the endpoint's schema) on the way to every request; reading it once per change
/// of the document took a sixth of the driver's work per submission.
#[derive(Debug, Default)]
pub(crate) struct ReadRoutes(Mutex<HashMap<ModelId, ReadRoute>>);

/// A route as read, with the data it was read from.
#[derive(Debug)]
struct ReadRoute {
    data: Map<String, Value>,
    fal: Arc<FalRoute>,
}

impl ReadRoutes {
    /// The first fal route of `model`, read again only when its data changed since last read.
    ///
    /// # Errors
    /// As [`FalRoute::of`].
    fn of(&self, model: &Model) -> Result<Arc<FalRoute>, RouteError> {
        let route = first_route(model)?;
        if let Some(read) = self.0.lock().unwrap_or_else(PoisonError::into_inner).get(&model.id)
            && read.data == route.data
        {
            return Ok(Arc::clone(&read.fal));
        }
        let fal = Arc::new(FalRoute::read_for_request(route)?);
        let mut routes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        routes.insert(model.id.clone(), ReadRoute { data: route.data.clone(), fal: Arc::clone(&fal) });
        Ok(fal)
    }

    /// [`fal_request`] through the routes read.
    ///
    /// # Errors
    /// As [`fal_request`].
    pub(crate) fn request(&self, model: &Model, input: &GenerationInput) -> Result<FalRequest, RouteError> {
        self.of(model)?.request(model, input)
    }

    /// [`refused_extra_key`] through the routes read.
    pub(crate) fn refused_extra_key<'e>(&self, model: &Model, extra: &'e Map<String, Value>) -> Option<&'e str> {
        self.of(model).ok()?.refused_extra_key(extra)
    }
}

/// A request in fal's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct FalRequest {
    /// The endpoint id, e.g. `fal-ai/nano-banana`.
    pub endpoint: String,
    /// The JSON body.
    pub body: Value,
}

/// Why a request cannot be expressed for fal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The model has no fal route.
    #[error("model {0} has no fal route")]
    UnknownModel(String),
    /// The model's fal route does not read (a document stored before a rule tightened).
    #[error("the model's fal route is not valid: {0}")]
    Malformed(String),
    /// A value has no fal translation.
    #[error("{field} {value:?} cannot be sent to fal")]
    Untranslatable {
        /// Our field.
        field: String,
        /// Its value.
        value: String,
    },
    /// The route takes no reference images.
    #[error("model {model} takes no image inputs")]
    NoImages {
        /// The model.
        model: String,
    },
}

/// The fal request for `input` to `model`: the endpoint for its resolution and images, our
/// fields under fal's names and translated, then `extra` merged on top unchanged (the client's
/// explicit word to the provider wins a clash).
///
/// # Errors
/// [`RouteError`] when the model has no fal route, takes no images, or a value has no
/// translation.
pub fn fal_request(model: &Model, input: &GenerationInput) -> Result<FalRequest, RouteError> {
    FalRoute::of(model)?.request(model, input)
}

impl FalRoute {
    /// The first key of `extra` (in key order) that a request on this route may not set.
    fn refused_extra_key<'e>(&self, extra: &'e Map<String, Value>) -> Option<&'e str> {
        extra.keys().map(String::as_str).find(|key| self.refuses(key))
    }

    /// The fal request for `input` to `model` on this route, as [`fal_request`] says.
    fn request(&self, model: &Model, input: &GenerationInput) -> Result<FalRequest, RouteError> {
        let with_images = !input.image_inputs.is_empty();
        let (endpoint, without) = self
            .variants
            .iter()
            .find(|v| {
                v.images.is_none_or(|images| images == with_images)
                    && v.resolution.as_ref().is_none_or(|res| input.resolution.as_ref() == Some(res))
            })
            .map_or((&self.endpoint, &self.without), |v| (&v.endpoint, &v.without));
        let mut body = Map::new();
        for (field, value) in input.mappable_fields() {
            let (Some(value), Some(param)) = (value, self.params.as_ref().and_then(|p| p.get(field))) else { continue };
            if without.iter().any(|w| w == field) {
                continue;
            }
            let shown = value.to_string();
            let converted = param
                .convert(value)
                .ok_or_else(|| RouteError::Untranslatable { field: field.to_owned(), value: shown })?;
            body.insert(param.to().to_owned(), converted);
        }
        if !input.image_inputs.is_empty() {
            let images =
                self.image_inputs.as_ref().ok_or_else(|| RouteError::NoImages { model: model.id.to_string() })?;
            body.extend(input.image_inputs_value(images.list).map(|value| (images.to.clone(), value)));
        }
        if let Some(extra) = &input.extra {
            body.extend(extra.clone());
        }
        Ok(FalRequest { endpoint: endpoint.clone(), body: Value::Object(body) })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use genjobs_domain::catalog::{Catalog, ModelDocument};

    use super::*;
    use crate::draft::draft_document;

    fn model(id: &str) -> Model {
        Catalog::builtin().unwrap().model(id).unwrap().clone()
    }

    #[test]
    fn every_known_endpoint_drafts_a_document_that_passes_every_check() {
        for endpoint_id in schema::endpoints().keys() {
            let draft = draft_document(None, endpoint_id).unwrap();
            let id = draft["id"].as_str().unwrap().to_owned();
            let model = Model::from_document(&id, ModelDocument::from_value(draft).unwrap()).unwrap();
            assert_eq!(FalSchemas.check_route(&model, &model.routes[0]), Ok(()), "{endpoint_id}");
            assert!(!model.enabled, "a draft is off until the operator prices it");
        }
        assert!(draft_document(Some("x"), "fal-ai/unknown").is_none());
    }

    fn fal_request(id: &str, input: &GenerationInput) -> Result<FalRequest, RouteError> {
        super::fal_request(&model(id), input)
    }

    /// A route of `id` with one change, checked.
    fn check_changed(id: &str, change: impl FnOnce(&mut Map<String, Value>)) -> Result<(), DocumentFault> {
        let mut route = model(id).routes[0].clone();
        change(&mut route.data);
        FalSchemas.check_route(&model(id), &route)
    }

    fn input() -> GenerationInput {
        GenerationInput {
            prompt: "a cat".into(),
            negative_prompt: Some("blur".into()),
            aspect_ratio: "16:9".into(),
            resolution: Some("720p".into()),
            duration_sec: Some(5),
            n: None,
            seed: Some(7),
            image_inputs: vec![],
            extra: None,
        }
    }

    #[test]
    fn every_builtin_route_passes_its_check() {
        let catalog = Catalog::builtin().unwrap();
        for model in catalog.managed() {
            for (_, route) in model.routes_of(PROVIDER) {
                assert_eq!(FalSchemas.check_route(model, route), Ok(()), "{}", model.id);
            }
        }
    }

    #[test]
    fn a_route_is_checked_against_the_endpoint_schemas() {
        let path = |r: Result<(), DocumentFault>| r.unwrap_err().path;
        let unknown = check_changed("nano-banana", |r| {
            r.insert("endpoint".into(), json!("fal-ai/no-such-model"));
        });
        assert_eq!(path(unknown), "endpoint");
        let unknown_variant = check_changed("nano-banana", |r| {
            r["variants"][0]["endpoint"] = json!("fal-ai/nope/edit");
        });
        assert_eq!(path(unknown_variant), "variants[0].endpoint");
        let not_taken = check_changed("nano-banana", |r| {
            r["params"]["seed"] = json!("random_seed");
        });
        assert_eq!(path(not_taken), "params.seed");
        let unknown_field = check_changed("flux-pro", |r| {
            r["params"]["style"] = json!("style");
        });
        assert_eq!(path(unknown_field), "params.style");
        let images = check_changed("flux-pro", |r| {
            r["image_inputs"]["to"] = json!("reference_images");
        });
        assert_eq!(path(images), "image_inputs.to");
        let bad_params = check_changed("flux-pro", |r| {
            r["params"] = json!(["prompt"]);
        });
        assert_eq!(path(bad_params), "params");
        let kling_without = check_changed("kling-2.1-master", |r| {
            r["variants"][0]["without"] = json!([]);
        });
        assert_eq!(path(kling_without), "params.aspect_ratio", "image-to-video takes no aspect ratio");
    }

    #[test]
    fn a_route_that_leaves_its_mapping_out_takes_the_one_its_endpoint_suggests() {
        let mut document = model("nano-banana").document();
        document.routes[0].data = json!({"endpoint": "fal-ai/nano-banana/edit"}).as_object().cloned().unwrap();
        let nano = Model::from_document("nano-banana", document).unwrap();
        assert_eq!(FalSchemas.check_route(&nano, &nano.routes[0]), Ok(()));
        let input = GenerationInput { n: Some(2), image_inputs: vec!["https://a/1.png".into()], ..input() };
        let request = super::fal_request(&nano, &input).unwrap();
        assert_eq!(
            (request.body["num_images"].as_u64(), request.body["image_urls"][0].as_str()),
            (Some(2), Some("https://a/1.png"))
        );
        assert_eq!(refused_extra_key(&nano, json!({"num_images": 4}).as_object().unwrap()), Some("num_images"));
    }

    #[test]
    fn routes_read_once_are_read_again_when_the_model_changes_its_route() {
        let routes = ReadRoutes::default();
        let nano = model("nano-banana");
        let input = GenerationInput { n: Some(2), ..input() };
        assert_eq!(routes.request(&nano, &input), super::fal_request(&nano, &input));
        let mut document = nano.document();
        document.routes[0].data = json!({"endpoint": "fal-ai/nano-banana/edit"}).as_object().cloned().unwrap();
        let edited = Model::from_document("nano-banana", document).unwrap();
        let request = routes.request(&edited, &input).unwrap();
        assert_eq!(request.endpoint, "fal-ai/nano-banana/edit");
        assert_eq!(routes.request(&edited, &input), super::fal_request(&edited, &input));
        assert_eq!(routes.request(&nano, &input).unwrap().endpoint, "fal-ai/nano-banana");
        let extra = json!({"num_images": 4});
        assert_eq!(routes.refused_extra_key(&edited, extra.as_object().unwrap()), Some("num_images"));
    }

    #[test]
    fn seedance_goes_to_the_fast_tier_at_720p_and_the_standard_one_at_1080p() {
        let fast = fal_request("seedance-2.0-fast", &input()).unwrap();
        assert_eq!(fast.endpoint, "bytedance/seedance-2.0/fast/text-to-video");
        assert_eq!(
            fast.body,
            json!({"prompt": "a cat", "aspect_ratio": "16:9", "resolution": "720p", "duration": "5"})
        );
        let standard =
            fal_request("seedance-2.0-fast", &GenerationInput { resolution: Some("1080p".into()), ..input() });
        assert_eq!(standard.unwrap().endpoint, "bytedance/seedance-2.0/text-to-video");
        let first_frame =
            GenerationInput { image_inputs: vec!["https://a/1.png".into(), "https://a/2.png".into()], ..input() };
        let i2v = fal_request("seedance-2.0-fast", &first_frame).unwrap();
        assert_eq!(i2v.endpoint, "bytedance/seedance-2.0/fast/image-to-video");
        assert_eq!(i2v.body["image_url"], "https://a/1.png");
    }

    #[test]
    fn kling_sends_the_aspect_ratio_to_text_to_video_only() {
        let t2v = fal_request("kling-2.1-master", &input()).unwrap();
        assert_eq!(t2v.body["aspect_ratio"], "16:9");
        let with_image = GenerationInput { image_inputs: vec!["https://a/1.png".into()], ..input() };
        let i2v = fal_request("kling-2.1-master", &with_image).unwrap();
        assert_eq!(i2v.endpoint, "fal-ai/kling-video/v2.1/master/image-to-video");
        assert!(i2v.body.get("aspect_ratio").is_none() && i2v.body.get("seed").is_none());
    }

    #[test]
    fn ideogram_takes_an_image_size_and_remixes_an_image() {
        for (ratio, preset) in [("1:1", "square_hd"), ("16:9", "landscape_16_9"), ("3:4", "portrait_4_3")] {
            let request =
                fal_request("ideogram-v3", &GenerationInput { aspect_ratio: ratio.into(), n: Some(2), ..input() });
            let request = request.unwrap();
            assert_eq!((request.body["image_size"].as_str(), request.body.get("aspect_ratio")), (Some(preset), None));
        }
        let remix = GenerationInput { image_inputs: vec!["https://a/1.png".into()], n: Some(1), ..input() };
        let remix = fal_request("ideogram-v3", &remix).unwrap();
        assert_eq!(
            (remix.endpoint.as_str(), remix.body["image_url"].as_str()),
            ("fal-ai/ideogram/v3/remix", Some("https://a/1.png"))
        );
        let odd = GenerationInput { aspect_ratio: "21:9".into(), ..input() };
        assert!(matches!(fal_request("ideogram-v3", &odd), Err(RouteError::Untranslatable { .. })));
    }

    #[test]
    fn nano_banana_sends_the_seed_and_extra_passes_through() {
        let extra = json!({"safety_tolerance": "5", "output_format": "png"}).as_object().cloned();
        let request = fal_request("nano-banana", &GenerationInput { n: Some(3), extra, ..input() }).unwrap();
        assert_eq!(request.body["num_images"], 3);
        assert_eq!((request.body["seed"].as_u64(), request.body["safety_tolerance"].as_str()), (Some(7), Some("5")));
        assert_eq!(request.body["output_format"], "png");
    }

    #[test]
    fn extra_may_not_set_what_is_derived_or_priced() {
        let refused =
            |id: &str, extra: Value| refused_extra_key(&model(id), extra.as_object().unwrap()).map(str::to_owned);
        assert_eq!(refused("nano-banana", json!({"num_images": 4})).as_deref(), Some("num_images"));
        assert_eq!(refused("nano-banana", json!({"safety_tolerance": "2", "seed": 1})).as_deref(), Some("seed"));
        assert_eq!(refused("nano-banana", json!({"image_urls": ["https://a/b.png"]})).as_deref(), Some("image_urls"));
        assert_eq!(refused("seedance-2.0-fast", json!({"duration": "15"})).as_deref(), Some("duration"));
        assert_eq!(refused("seedance-2.0-fast", json!({"resolution": "1080p"})).as_deref(), Some("resolution"));
        assert_eq!(refused("ideogram-v3", json!({"rendering_speed": "QUALITY"})).as_deref(), Some("rendering_speed"));
        assert_eq!(refused("ideogram-v3", json!({"image_size": "square_hd"})).as_deref(), Some("image_size"));
        assert_eq!(
            refused("kling-2.1-master", json!({"cfg_scale": 0.5, "negative_prompt": "x"})).as_deref(),
            Some("negative_prompt")
        );
        assert_eq!(refused("flux-pro", json!({"safety_tolerance": "2", "raw": true})), None);
    }
}
