//! Which fal endpoint serves a request for a catalog model, and the body it takes: parameter
//! names, value translations (seconds as a string, an aspect ratio as an `image_size` preset) and
//! how reference images are passed. The data is `fal-models.json`; every endpoint it names is in
//! `fal-endpoints.json`, with the schema it was checked against.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use genjobs_domain::input::GenerationInput;
use serde::Deserialize;
use serde_json::{Map, Value};

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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Route {
    /// The resolution this route serves; any when absent.
    #[serde(default)]
    resolution: Option<String>,
    /// Whether it serves requests with image inputs.
    images: bool,
    endpoint: String,
    /// Our fields this endpoint does not take, although the model's others do.
    #[serde(default)]
    without: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageInputs {
    to: String,
    list: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelRoutes {
    routes: Vec<Route>,
    /// Our body field (snake_case) to fal's parameter; fields not listed are not sent.
    params: BTreeMap<String, Param>,
    image_inputs: ImageInputs,
    /// fal parameters `extra` may not set besides the ones `params` and `image_inputs` derive:
    /// those the price depends on (the number of images, the duration, the resolution, a
    /// rendering tier), so that `extra` can never make fal produce more than was held.
    extra_refused: Vec<String>,
}

impl ModelRoutes {
    /// Whether `extra` may not set the fal parameter `key`.
    fn refuses(&self, key: &str) -> bool {
        self.params.values().any(|param| param.to() == key)
            || self.image_inputs.to == key
            || self.extra_refused.iter().any(|refused| refused == key)
    }
}

/// The first key of `extra` (in key order) that a request to `model` may not set: a parameter
/// the adapter derives from a body field, or one the price depends on. `None` when every key
/// passes, or when the model has no fal route (submitting it fails anyway).
#[must_use]
pub fn refused_extra_key<'e>(model: &str, extra: &'e Map<String, Value>) -> Option<&'e str> {
    let routes = ROUTES.get(model)?;
    extra.keys().map(String::as_str).find(|key| routes.refuses(key))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutesFile {
    models: BTreeMap<String, ModelRoutes>,
}

static ROUTES: LazyLock<BTreeMap<String, ModelRoutes>> = LazyLock::new(|| {
    serde_json::from_str::<RoutesFile>(include_str!("../fal-models.json"))
        .map(|f| f.models)
        .unwrap_or_else(|e| panic!("fal-models.json is built in and checked by a unit test: {e}"))
});

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
    /// The catalog has a model this adapter has no route for.
    #[error("model {0} has no fal route")]
    UnknownModel(String),
    /// No route serves this combination (a resolution, with or without images).
    #[error("model {model} has no fal endpoint for this request")]
    NoRoute {
        /// The model.
        model: String,
    },
    /// A value has no fal translation.
    #[error("{field} {value:?} cannot be sent to fal")]
    Untranslatable {
        /// Our field.
        field: String,
        /// Its value.
        value: String,
    },
}

/// The fal request for `input` to `model`: the route for its resolution and images, our fields
/// under fal's names and translated, then `extra` merged on top unchanged (the client's explicit
/// word to the provider wins a clash).
///
/// # Errors
/// [`RouteError`] when the model or the combination has no route, or a value no translation.
pub fn fal_request(model: &str, input: &GenerationInput) -> Result<FalRequest, RouteError> {
    let routes = ROUTES.get(model).ok_or_else(|| RouteError::UnknownModel(model.to_owned()))?;
    let with_images = !input.image_inputs.is_empty();
    let route = routes
        .routes
        .iter()
        .find(|r| {
            r.images == with_images && r.resolution.as_ref().is_none_or(|res| input.resolution.as_ref() == Some(res))
        })
        .ok_or_else(|| RouteError::NoRoute { model: model.to_owned() })?;
    let fields = [
        ("prompt", Some(Value::String(input.prompt.clone()))),
        ("negative_prompt", input.negative_prompt.clone().map(Value::String)),
        ("aspect_ratio", Some(Value::String(input.aspect_ratio.clone()))),
        ("resolution", input.resolution.clone().map(Value::String)),
        ("duration_sec", input.duration_sec.map(Value::from)),
        ("n", input.n.map(Value::from)),
        ("seed", input.seed.map(Value::from)),
    ];
    let mut body = Map::new();
    for (field, value) in fields {
        let (Some(value), Some(param)) = (value, routes.params.get(field)) else { continue };
        if route.without.iter().any(|w| w == field) {
            continue;
        }
        let shown = value.to_string();
        let converted =
            param.convert(value).ok_or_else(|| RouteError::Untranslatable { field: field.to_owned(), value: shown })?;
        body.insert(param.to().to_owned(), converted);
    }
    if let Some(first) = input.image_inputs.first() {
        let images = &routes.image_inputs;
        let value = if images.list { Value::from(input.image_inputs.clone()) } else { Value::String(first.clone()) };
        body.insert(images.to.clone(), value);
    }
    if let Some(extra) = &input.extra {
        body.extend(extra.clone());
    }
    Ok(FalRequest { endpoint: route.endpoint.clone(), body: Value::Object(body) })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema;

    /// The endpoint ids the routes name, each once.
    fn endpoint_ids() -> Vec<&'static str> {
        let mut ids: Vec<&str> = ROUTES.values().flat_map(|m| m.routes.iter().map(|r| r.endpoint.as_str())).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
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
    fn every_routed_endpoint_has_a_known_schema() {
        for id in endpoint_ids() {
            assert!(schema::endpoint(id).is_some(), "{id} has no schema in fal-endpoints.json");
        }
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
            |model: &str, extra: Value| refused_extra_key(model, extra.as_object().unwrap()).map(str::to_owned);
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
