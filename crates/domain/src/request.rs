//! Generation requests: the JSON body of either generation endpoint, validated once into a
//! [`GenerationRequest`] with every default applied. Each refusal names the offending `param`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalog::{Catalog, Modality, Model};
use crate::ids::ModelId;

/// Longest `prompt`, in characters after trimming.
pub const MAX_PROMPT_CHARS: usize = 10_000;
/// Longest `negative_prompt`, in characters.
pub const MAX_NEGATIVE_PROMPT_CHARS: usize = 2_000;
/// Most `image_inputs`.
pub const MAX_IMAGE_INPUTS: usize = 10;
/// Longest URL in `image_inputs`.
pub const MAX_IMAGE_URL_CHARS: usize = 2_048;
/// Largest `extra` object, serialized.
pub const MAX_EXTRA_BYTES: usize = 64 * 1024;
/// Most images per request.
pub const MAX_IMAGES: u8 = 4;

/// A body or parameter the service refuses, with the name of the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidRequest {
    /// The body field or query parameter at fault, when there is one.
    pub param: Option<String>,
    /// What is wrong, for a human.
    pub message: String,
}

impl InvalidRequest {
    /// A refusal about one field.
    #[must_use]
    pub fn param(param: &str, message: impl Into<String>) -> Self {
        Self { param: Some(param.to_owned()), message: message.into() }
    }

    /// A refusal about the whole body.
    #[must_use]
    pub fn body(message: impl Into<String>) -> Self {
        Self { param: None, message: message.into() }
    }
}

/// The validated inputs of a generation, defaults applied; what the job keeps of the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationInput {
    /// Trimmed prompt.
    pub prompt: String,
    /// What to avoid.
    pub negative_prompt: Option<String>,
    /// The aspect ratio in effect.
    pub aspect_ratio: String,
    /// The resolution in effect, for models that take one.
    pub resolution: Option<String>,
    /// Seconds of video, for video models.
    pub duration_sec: Option<u32>,
    /// Number of images, for image models.
    pub n: Option<u8>,
    /// Seed for reproducibility; random at the provider when absent.
    pub seed: Option<u32>,
    /// Reference image URLs.
    pub image_inputs: Vec<String>,
    /// Provider-specific parameters, passed through unchanged.
    pub extra: Option<Map<String, Value>>,
}

/// A generation request, validated against the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationRequest {
    /// The model in effect (the endpoint's default when none was sent).
    pub model: ModelId,
    /// The endpoint's modality.
    pub modality: Modality,
    /// The validated inputs.
    pub input: GenerationInput,
}

const VIDEO_FIELDS: &[&str] = &[
    "prompt",
    "model",
    "duration_sec",
    "aspect_ratio",
    "resolution",
    "image_inputs",
    "seed",
    "negative_prompt",
    "extra",
];
const IMAGE_FIELDS: &[&str] =
    &["prompt", "model", "aspect_ratio", "n", "seed", "image_inputs", "negative_prompt", "extra"];

/// Default model of the video endpoint.
pub const DEFAULT_VIDEO_MODEL: &str = "seedance-2.0-fast";
/// Default model of the image endpoint.
pub const DEFAULT_IMAGE_MODEL: &str = "nano-banana";

struct Body<'a>(&'a Map<String, Value>);

impl Body<'_> {
    /// A field that is absent or `null` is treated alike: the default applies.
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    fn string(&self, name: &str) -> Result<Option<&str>, InvalidRequest> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(InvalidRequest::param(name, format!("`{name}` must be a string"))),
        }
    }

    fn integer(&self, name: &str, min: u64, max: u64) -> Result<Option<u64>, InvalidRequest> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let out_of_range = || InvalidRequest::param(name, format!("`{name}` must be an integer from {min} to {max}"));
        let number = match value {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64).map(|f| f as u64)
            }),
            _ => {
                return Err(InvalidRequest::param(name, format!("`{name}` must be a number")));
            }
        };
        number.filter(|n| (min..=max).contains(n)).map(Some).ok_or_else(out_of_range)
    }

    fn choice(&self, name: &str, allowed: &[String], default: Option<&str>) -> Result<Option<String>, InvalidRequest> {
        match self.string(name)? {
            None => Ok(default.map(str::to_owned)),
            Some(v) if allowed.iter().any(|a| a == v) => Ok(Some(v.to_owned())),
            Some(v) => {
                Err(InvalidRequest::param(name, format!("`{name}` must be one of {}; got {v:?}", allowed.join(", "))))
            }
        }
    }
}

impl GenerationRequest {
    /// Validates the body of the generation endpoint of `endpoint` (video or image).
    ///
    /// # Errors
    /// [`InvalidRequest`] naming the first field at fault: a body that is not an object, an
    /// unknown field, a missing or over-long prompt, an unknown model or one of another modality,
    /// a value of the wrong type, outside its range or not among its choices.
    pub fn parse(endpoint: Modality, body: &Value, catalog: &Catalog) -> Result<Self, InvalidRequest> {
        let Value::Object(map) = body else {
            return Err(InvalidRequest::body("the body must be a JSON object"));
        };
        let known = if endpoint == Modality::Video { VIDEO_FIELDS } else { IMAGE_FIELDS };
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(InvalidRequest::param(unknown, format!("unknown field `{unknown}`")));
        }
        let body = Body(map);

        let prompt = match body.string("prompt")?.map(str::trim) {
            None | Some("") => return Err(InvalidRequest::param("prompt", "`prompt` is required")),
            Some(p) if p.chars().count() > MAX_PROMPT_CHARS => {
                return Err(InvalidRequest::param(
                    "prompt",
                    format!("`prompt` must be at most {MAX_PROMPT_CHARS} characters"),
                ));
            }
            Some(p) => p.to_owned(),
        };
        let model = resolve_model(&body, endpoint, catalog)?;

        let negative_prompt = match body.string("negative_prompt")? {
            Some(p) if p.chars().count() > MAX_NEGATIVE_PROMPT_CHARS => {
                return Err(InvalidRequest::param(
                    "negative_prompt",
                    format!("`negative_prompt` must be at most {MAX_NEGATIVE_PROMPT_CHARS} characters"),
                ));
            }
            Some(p) if !p.trim().is_empty() => Some(p.to_owned()),
            _ => None,
        };
        let aspect_ratio = body
            .choice("aspect_ratio", &model.aspect_ratios, Some(&model.default_aspect_ratio))?
            .unwrap_or_else(|| model.default_aspect_ratio.clone());

        let resolution = if model.resolutions.is_empty() {
            if body.get("resolution").is_some() {
                return Err(InvalidRequest::param(
                    "resolution",
                    format!("model {} does not take `resolution`", model.id),
                ));
            }
            None
        } else {
            body.choice("resolution", &model.resolutions, model.default_resolution.as_deref())?
        };

        let duration_sec = match model.duration_sec {
            Some(range) => Some(
                body.integer("duration_sec", u64::from(range.min), u64::from(range.max))?
                    .map_or(range.default, |d| d as u32),
            ),
            None => None,
        };
        let n = match endpoint {
            Modality::Image => Some(body.integer("n", 1, u64::from(MAX_IMAGES))?.map_or(1, |n| n as u8)),
            _ => None,
        };
        let seed = body.integer("seed", 0, u64::from(u32::MAX))?.map(|s| s as u32);
        let image_inputs = image_inputs(&body)?;
        let extra = match body.get("extra") {
            None => None,
            Some(Value::Object(extra)) => {
                if serde_json::to_vec(extra).map_or(usize::MAX, |b| b.len()) > MAX_EXTRA_BYTES {
                    return Err(InvalidRequest::param("extra", "`extra` must be at most 64 KiB"));
                }
                Some(extra.clone())
            }
            Some(_) => {
                return Err(InvalidRequest::param("extra", "`extra` must be a JSON object"));
            }
        };

        Ok(GenerationRequest {
            model: model.id.clone(),
            modality: endpoint,
            input: GenerationInput {
                prompt,
                negative_prompt,
                aspect_ratio,
                resolution,
                duration_sec,
                n,
                seed,
                image_inputs,
                extra,
            },
        })
    }
}

fn resolve_model<'c>(body: &Body<'_>, endpoint: Modality, catalog: &'c Catalog) -> Result<&'c Model, InvalidRequest> {
    let default = if endpoint == Modality::Video { DEFAULT_VIDEO_MODEL } else { DEFAULT_IMAGE_MODEL };
    let id = body.string("model")?.unwrap_or(default);
    let model = catalog.model(id).ok_or_else(|| InvalidRequest::param("model", format!("unknown model {id:?}")))?;
    if model.modality != endpoint {
        return Err(InvalidRequest::param(
            "model",
            format!("model {id:?} is a {} model, not a {} model", model.modality.as_str(), endpoint.as_str()),
        ));
    }
    Ok(model)
}

fn image_inputs(body: &Body<'_>) -> Result<Vec<String>, InvalidRequest> {
    let param = "image_inputs";
    let items = match body.get(param) {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(InvalidRequest::param(param, "`image_inputs` must be an array of URLs"));
        }
    };
    if items.len() > MAX_IMAGE_INPUTS {
        return Err(InvalidRequest::param(param, format!("`image_inputs` takes at most {MAX_IMAGE_INPUTS} URLs")));
    }
    items
        .iter()
        .map(|item| match item {
            Value::String(url) if is_web_url(url) => Ok(url.clone()),
            _ => Err(InvalidRequest::param(
                param,
                format!(
                    "each of `image_inputs` must be an http or https URL of at most {MAX_IMAGE_URL_CHARS} characters"
                ),
            )),
        })
        .collect()
}

fn is_web_url(url: &str) -> bool {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    url.len() <= MAX_IMAGE_URL_CHARS
        && rest.is_some_and(|r| {
            let host = r.split(['/', '?', '#']).next().unwrap_or("");
            !host.is_empty() && !r.chars().any(char::is_whitespace)
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(endpoint: Modality, body: Value) -> Result<GenerationRequest, InvalidRequest> {
        GenerationRequest::parse(endpoint, &body, &Catalog::builtin().unwrap())
    }

    fn refused_param(endpoint: Modality, body: Value) -> String {
        parse(endpoint, body).unwrap_err().param.unwrap_or_default()
    }

    #[test]
    fn video_defaults_follow_the_spec() {
        let request = parse(Modality::Video, json!({"prompt": "  a cat  "})).unwrap();
        assert_eq!(request.model.as_str(), "seedance-2.0-fast");
        assert_eq!(request.input.prompt, "a cat");
        assert_eq!(request.input.aspect_ratio, "16:9");
        assert_eq!(request.input.resolution.as_deref(), Some("1080p"));
        assert_eq!(request.input.duration_sec, Some(5));
        assert_eq!(request.input.n, None);
    }

    #[test]
    fn image_defaults_follow_the_spec() {
        let request = parse(Modality::Image, json!({"prompt": "a cat"})).unwrap();
        assert_eq!(request.model.as_str(), "nano-banana");
        assert_eq!(request.input.aspect_ratio, "1:1");
        assert_eq!(request.input.n, Some(1));
        assert_eq!(request.input.resolution, None);
    }

    #[test]
    fn every_limit_names_its_param() {
        let long = "x".repeat(MAX_PROMPT_CHARS + 1);
        let cases = [
            (Modality::Video, json!({}), "prompt"),
            (Modality::Video, json!({"prompt": "   "}), "prompt"),
            (Modality::Video, json!({"prompt": 5}), "prompt"),
            (Modality::Video, json!({"prompt": long}), "prompt"),
            (Modality::Video, json!({"prompt": "a", "negative_prompt": "x".repeat(2001)}), "negative_prompt"),
            (Modality::Video, json!({"prompt": "a", "model": "nope"}), "model"),
            (Modality::Video, json!({"prompt": "a", "model": "flux-pro"}), "model"),
            (Modality::Image, json!({"prompt": "a", "model": "seedance-2.0-fast"}), "model"),
            (Modality::Video, json!({"prompt": "a", "aspect_ratio": "4:3"}), "aspect_ratio"),
            (Modality::Image, json!({"prompt": "a", "aspect_ratio": "21:9"}), "aspect_ratio"),
            (Modality::Video, json!({"prompt": "a", "resolution": "4k"}), "resolution"),
            (Modality::Video, json!({"prompt": "a", "model": "kling-2.1-master", "resolution": "720p"}), "resolution"),
            (Modality::Video, json!({"prompt": "a", "duration_sec": 3}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "duration_sec": 16}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "duration_sec": 5.5}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "duration_sec": "5"}), "duration_sec"),
            (Modality::Image, json!({"prompt": "a", "n": 0}), "n"),
            (Modality::Image, json!({"prompt": "a", "n": 5}), "n"),
            (Modality::Video, json!({"prompt": "a", "n": 2}), "n"),
            (Modality::Video, json!({"prompt": "a", "seed": -1}), "seed"),
            (Modality::Video, json!({"prompt": "a", "seed": 4_294_967_296_u64}), "seed"),
            (Modality::Video, json!({"prompt": "a", "image_inputs": "https://a/b.png"}), "image_inputs"),
            (Modality::Video, json!({"prompt": "a", "image_inputs": ["ftp://a/b.png"]}), "image_inputs"),
            (Modality::Video, json!({"prompt": "a", "image_inputs": ["https://"]}), "image_inputs"),
            (
                Modality::Video,
                json!({"prompt": "a", "image_inputs": [format!("https://a/{}", "x".repeat(2048))]}),
                "image_inputs",
            ),
            (Modality::Video, json!({"prompt": "a", "image_inputs": vec!["https://a/b.png"; 11]}), "image_inputs"),
            (Modality::Video, json!({"prompt": "a", "extra": [1]}), "extra"),
            (Modality::Video, json!({"prompt": "a", "extra": {"k": "x".repeat(MAX_EXTRA_BYTES)}}), "extra"),
            (Modality::Video, json!({"prompt": "a", "surprise": true}), "surprise"),
        ];
        for (endpoint, body, param) in cases {
            assert_eq!(refused_param(endpoint, body.clone()), param, "{body}");
        }
    }

    #[test]
    fn boundary_values_are_accepted() {
        let ok = [
            (
                Modality::Video,
                json!({"prompt": "x".repeat(MAX_PROMPT_CHARS), "duration_sec": 15, "seed": 4_294_967_295_u64}),
            ),
            (Modality::Video, json!({"prompt": "a", "duration_sec": 4.0, "seed": 0, "resolution": "720p"})),
            (
                Modality::Image,
                json!({"prompt": "a", "n": 4, "aspect_ratio": "3:4", "image_inputs": vec!["http://a/b.png"; 10]}),
            ),
            (Modality::Image, json!({"prompt": "a", "seed": null, "extra": {"anything": [1, {"deep": true}]}})),
        ];
        for (endpoint, body) in ok {
            assert!(parse(endpoint, body.clone()).is_ok(), "{body}");
        }
    }

    #[test]
    fn a_body_that_is_not_an_object_is_refused_without_param() {
        let err = parse(Modality::Image, json!(["prompt"])).unwrap_err();
        assert_eq!(err.param, None);
    }
}
