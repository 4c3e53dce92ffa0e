//! Request bodies. Each is read field by field from the JSON object, so that a value of the wrong
//! type is refused with the field's name as `param`, then turned into the domain's request with
//! `try_into_domain`, where the domain's rules (ranges, choices, the catalog) apply.

use genjobs_domain::catalog::Catalog;
use genjobs_domain::modality::Modality;
use genjobs_domain::request::{GenerationDraft, GenerationRequest, InvalidRequest, WholeNumber};
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

mod admin;

pub use admin::{GrantBody, NewUserBody};

/// A JSON object body whose fields are taken one by one; a field absent or `null` is `None`.
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn of(body: &'a Value, known: &[&str]) -> Result<Self, InvalidRequest> {
        let Value::Object(map) = body else {
            return Err(InvalidRequest::body("the body must be a JSON object"));
        };
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(InvalidRequest::param(unknown, format!("unknown field `{unknown}`")));
        }
        // U+0000 is refused everywhere, nested values of `extra` included: Postgres cannot keep it
        // in text or jsonb, and no prompt or parameter needs it.
        if let Some((field, _)) = map.iter().find(|(_, value)| has_nul(value)) {
            return Err(InvalidRequest::param(field, format!("`{field}` must not contain the character U+0000")));
        }
        Ok(Self(map))
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    fn typed<T: DeserializeOwned>(&self, name: &str, expected: &str) -> Result<Option<T>, InvalidRequest> {
        self.get(name)
            .map(|v| T::deserialize(v).map_err(|_| InvalidRequest::param(name, format!("`{name}` must be {expected}"))))
            .transpose()
    }

    fn string(&self, name: &str) -> Result<Option<String>, InvalidRequest> {
        self.typed(name, "a string")
    }

    fn number(&self, name: &str) -> Result<Option<WholeNumber>, InvalidRequest> {
        match self.get(name) {
            Some(Value::String(text)) => Ok(Some(WholeNumber::Text(text.clone()))),
            _ => Ok(self.typed::<Number>(name, "a number")?.map(|n| whole(&n))),
        }
    }
}

fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `5` and `5.0` are the whole number 5; anything negative, fractional or beyond `u64` is not.
fn whole(n: &Number) -> WholeNumber {
    n.as_u64()
        .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64).map(|f| f as u64))
        .map_or(WholeNumber::Other, WholeNumber::Exact)
}

/// Body of `POST /api/v1/video/generations`.
#[derive(Debug, Clone, Default, PartialEq, ToSchema)]
#[schema(as = VideoGenerationRequest)]
pub struct VideoGenerationBody {
    /// Description of the video: 1 to 10,000 characters after trimming.
    #[schema(max_length = 10000)]
    pub prompt: Option<String>,
    /// Model id (`GET /api/v1/models?modality=video`); the catalog's default when absent.
    pub model: Option<String>,
    /// Seconds of video; one of the model's durations.
    #[schema(value_type = Option<u64>, minimum = 1)]
    pub duration_sec: Option<WholeNumber>,
    /// Aspect ratio, e.g. `16:9`.
    pub aspect_ratio: Option<String>,
    /// Resolution, e.g. `720p`.
    pub resolution: Option<String>,
    /// Reference image URLs (`http` or `https`, at most 2,048 characters each), up to 10.
    #[schema(max_items = 10)]
    pub image_inputs: Option<Vec<String>>,
    /// Seed, 0 to 2^32-1, for repeatable results where the model supports it.
    #[schema(value_type = Option<u64>, maximum = 4294967295_u64)]
    pub seed: Option<WholeNumber>,
    /// What to avoid, up to 2,000 characters.
    #[schema(max_length = 2000)]
    pub negative_prompt: Option<String>,
    /// Model-specific parameters, as the model's form fields name them (at most 64 KiB).
    #[schema(value_type = Option<Object>)]
    pub extra: Option<Map<String, Value>>,
    /// Where to POST the job's end (`job.succeeded`, `job.failed` or `job.canceled`), signed
    /// with the account's webhook secret: an absolute `http` or `https` URL of at most 2,048
    /// characters whose host is not, and does not resolve to, a loopback, private, link-local,
    /// unspecified or multicast address.
    #[schema(max_length = 2048)]
    pub webhook_url: Option<String>,
}

/// Body of `POST /api/v1/images/generations`.
#[derive(Debug, Clone, Default, PartialEq, ToSchema)]
#[schema(as = ImageGenerationRequest)]
pub struct ImageGenerationBody {
    /// Description of the image: 1 to 10,000 characters after trimming.
    #[schema(max_length = 10000)]
    pub prompt: Option<String>,
    /// Model id (`GET /api/v1/models?modality=image`); the catalog's default when absent.
    pub model: Option<String>,
    /// Aspect ratio, e.g. `1:1`.
    pub aspect_ratio: Option<String>,
    /// Number of images, 1 to 4.
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 4)]
    pub n: Option<WholeNumber>,
    /// Seed, 0 to 2^32-1, for repeatable results where the model supports it.
    #[schema(value_type = Option<u64>, maximum = 4294967295_u64)]
    pub seed: Option<WholeNumber>,
    /// Reference image URLs (`http` or `https`, at most 2,048 characters each), up to 10.
    #[schema(max_items = 10)]
    pub image_inputs: Option<Vec<String>>,
    /// What to avoid, up to 2,000 characters.
    #[schema(max_length = 2000)]
    pub negative_prompt: Option<String>,
    /// Model-specific parameters, as the model's form fields name them (at most 64 KiB).
    #[schema(value_type = Option<Object>)]
    pub extra: Option<Map<String, Value>>,
    /// Where to POST the job's end (`job.succeeded`, `job.failed` or `job.canceled`), signed
    /// with the account's webhook secret: an absolute `http` or `https` URL of at most 2,048
    /// characters whose host is not, and does not resolve to, a loopback, private, link-local,
    /// unspecified or multicast address.
    #[schema(max_length = 2048)]
    pub webhook_url: Option<String>,
}

/// The field names of each body, which are also its schema's properties (a test holds them
/// together).
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
    "webhook_url",
];
const IMAGE_FIELDS: &[&str] =
    &["prompt", "model", "aspect_ratio", "n", "seed", "image_inputs", "negative_prompt", "extra", "webhook_url"];

impl VideoGenerationBody {
    /// Reads the body.
    ///
    /// # Errors
    /// [`InvalidRequest`] for a body that is not an object, a field the endpoint does not have,
    /// or a value of the wrong JSON type.
    pub fn from_json(body: &Value) -> Result<Self, InvalidRequest> {
        let fields = Fields::of(body, VIDEO_FIELDS)?;
        Ok(Self {
            prompt: fields.string("prompt")?,
            model: fields.string("model")?,
            duration_sec: fields.number("duration_sec")?,
            aspect_ratio: fields.string("aspect_ratio")?,
            resolution: fields.string("resolution")?,
            image_inputs: fields.typed("image_inputs", "an array of URLs")?,
            seed: fields.number("seed")?,
            negative_prompt: fields.string("negative_prompt")?,
            extra: fields.typed("extra", "a JSON object")?,
            webhook_url: fields.string("webhook_url")?,
        })
    }

    /// The domain's validated request.
    ///
    /// # Errors
    /// [`InvalidRequest`] from the domain's rules.
    pub fn try_into_domain(self, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
        let draft = GenerationDraft {
            prompt: self.prompt,
            model: self.model,
            negative_prompt: self.negative_prompt,
            aspect_ratio: self.aspect_ratio,
            resolution: self.resolution,
            duration_sec: self.duration_sec,
            n: None,
            seed: self.seed,
            image_inputs: self.image_inputs,
            extra: self.extra,
            webhook_url: self.webhook_url,
        };
        GenerationRequest::validate(Modality::Video, draft, catalog)
    }
}

impl ImageGenerationBody {
    /// Reads the body.
    ///
    /// # Errors
    /// As [`VideoGenerationBody::from_json`].
    pub fn from_json(body: &Value) -> Result<Self, InvalidRequest> {
        let fields = Fields::of(body, IMAGE_FIELDS)?;
        Ok(Self {
            prompt: fields.string("prompt")?,
            model: fields.string("model")?,
            aspect_ratio: fields.string("aspect_ratio")?,
            n: fields.number("n")?,
            seed: fields.number("seed")?,
            image_inputs: fields.typed("image_inputs", "an array of URLs")?,
            negative_prompt: fields.string("negative_prompt")?,
            extra: fields.typed("extra", "a JSON object")?,
            webhook_url: fields.string("webhook_url")?,
        })
    }

    /// The domain's validated request.
    ///
    /// # Errors
    /// [`InvalidRequest`] from the domain's rules.
    pub fn try_into_domain(self, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
        let draft = GenerationDraft {
            prompt: self.prompt,
            model: self.model,
            negative_prompt: self.negative_prompt,
            aspect_ratio: self.aspect_ratio,
            resolution: None,
            duration_sec: None,
            n: self.n,
            seed: self.seed,
            image_inputs: self.image_inputs,
            extra: self.extra,
            webhook_url: self.webhook_url,
        };
        GenerationRequest::validate(Modality::Image, draft, catalog)
    }
}

/// Reads the body of the generation endpoint of `endpoint` into the domain's request.
///
/// # Errors
/// As the endpoint's body type.
pub fn generation_request(
    endpoint: Modality,
    body: &Value,
    catalog: &Catalog,
) -> Result<GenerationRequest, InvalidRequest> {
    match endpoint {
        Modality::Video => VideoGenerationBody::from_json(body)?.try_into_domain(catalog),
        _ => ImageGenerationBody::from_json(body)?.try_into_domain(catalog),
    }
}

/// A fingerprint of a generation request for idempotency: the endpoint and the canonical JSON of
/// the body (keys sorted), so that key order and white space do not make two equal bodies differ.
#[must_use]
pub fn request_fingerprint(endpoint: Modality, body: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(endpoint.as_str().as_bytes());
    hasher.update([0]);
    hasher.update(body.to_string().as_bytes());
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn generation(endpoint: Modality, body: Value) -> Result<GenerationRequest, InvalidRequest> {
        generation_request(endpoint, &body, &Catalog::builtin().unwrap())
    }

    fn properties<T: utoipa::PartialSchema>() -> Vec<String> {
        let utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(object)) = T::schema() else {
            panic!("an object schema")
        };
        object.properties.keys().cloned().collect()
    }

    #[test]
    fn each_schema_documents_exactly_the_fields_its_endpoint_reads() {
        let sorted = |names: &[&str]| {
            let mut names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
            names.sort();
            names
        };
        let mut video = properties::<VideoGenerationBody>();
        let mut image = properties::<ImageGenerationBody>();
        video.sort();
        image.sort();
        assert_eq!(video, sorted(VIDEO_FIELDS));
        assert_eq!(image, sorted(IMAGE_FIELDS));
    }

    #[test]
    fn wrong_types_and_unknown_fields_name_their_param() {
        let cases = [
            (Modality::Video, json!({"prompt": 5}), "prompt"),
            (Modality::Video, json!({"prompt": "a", "duration_sec": "5"}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "duration_sec": 5.5}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "seed": -1}), "seed"),
            (Modality::Video, json!({"prompt": "a", "image_inputs": "https://a/b.png"}), "image_inputs"),
            (Modality::Video, json!({"prompt": "a", "image_inputs": [5]}), "image_inputs"),
            (Modality::Video, json!({"prompt": "a", "extra": [1]}), "extra"),
            (Modality::Video, json!({"prompt": "a", "n": 2}), "n"),
            (Modality::Image, json!({"prompt": "a", "duration_sec": 5}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "surprise": true}), "surprise"),
        ];
        for (endpoint, body, param) in cases {
            let refused = generation(endpoint, body.clone()).unwrap_err();
            assert_eq!(refused.param.as_deref(), Some(param), "{body}");
        }
        assert_eq!(generation(Modality::Image, json!(["prompt"])).unwrap_err().param, None);
    }

    #[test]
    fn a_nul_character_anywhere_is_refused_with_its_field() {
        for (body, param) in [
            (json!({"prompt": "\u{0} sunset"}), "prompt"),
            (json!({"prompt": "a", "extra": {"deep": [{"k": "x\u{0}"}]}}), "extra"),
            (json!({"prompt": "a", "extra": {"k\u{0}": 1}}), "extra"),
            (json!({"prompt": "a", "image_inputs": ["https://a/\u{0}.png"]}), "image_inputs"),
        ] {
            let refused = ImageGenerationBody::from_json(&body).unwrap_err();
            assert_eq!(refused.param.as_deref(), Some(param), "{body}");
        }
        let name = NewUserBody::from_json(&json!({"name": "a\u{0}", "credits": 1})).unwrap_err();
        assert_eq!(name.param.as_deref(), Some("name"));
    }

    #[test]
    fn null_is_absent_and_whole_floats_are_whole() {
        let request =
            generation(Modality::Video, json!({"prompt": "a", "seed": null, "duration_sec": 4.0, "extra": {"k": [1]}}))
                .unwrap();
        assert_eq!((request.input.seed, request.input.duration_sec), (None, Some(4)));
        assert!(request.input.extra.is_some());
    }

    #[test]
    fn fingerprints_ignore_key_order_but_not_values_or_endpoint() {
        let a: Value = serde_json::from_str(r#"{"prompt":"x","n":2}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "n": 2, "prompt": "x" }"#).unwrap();
        assert_eq!(request_fingerprint(Modality::Image, &a), request_fingerprint(Modality::Image, &b));
        assert_ne!(request_fingerprint(Modality::Image, &a), request_fingerprint(Modality::Video, &a));
        let other = json!({"prompt": "y", "n": 2});
        assert_ne!(request_fingerprint(Modality::Image, &a), request_fingerprint(Modality::Image, &other));
    }

    #[test]
    fn admin_bodies_are_read_then_validated() {
        let user = NewUserBody::from_json(&json!({"name": "ada", "credits": 10, "max_concurrent_jobs": 2})).unwrap();
        assert_eq!(user.clone().try_into_domain().unwrap().max_concurrent_jobs, Some(2));
        for (body, param) in [
            (json!({"credits": 1}), "name"),
            (json!({"name": "a"}), "credits"),
            (json!({"name": "a", "credits": -1}), "credits"),
            (json!({"name": "a", "credits": 1, "rate_limit_per_minute": -3}), "rate_limit_per_minute"),
            (json!({"name": "a", "credits": 1, "admin": true}), "admin"),
        ] {
            assert_eq!(NewUserBody::from_json(&body).unwrap_err().param.as_deref(), Some(param), "{body}");
        }
        assert_eq!(GrantBody::from_json(&json!({"amount": -5})).unwrap().try_into_domain(), Ok(-5));
        assert!(GrantBody::from_json(&json!({"amount": 1.5})).is_err());
        assert!(GrantBody::from_json(&json!({})).is_err());
        assert!(GrantBody::from_json(&json!({"amount": 0})).unwrap().try_into_domain().is_err());
    }
}
