//! fal's endpoints as this adapter knows them: for each endpoint id the catalog routes to, the
//! input schema read from fal's published types (`fal-endpoints.json` names the source of each)
//! and the shape of its output. The simulator refuses by the same data what fal would refuse, so
//! the catalog's routes and fal's schemas cannot drift apart unnoticed.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The type of one input parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    /// A JSON string (its `enum`, when given, lists the values taken).
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// An array of strings.
    #[serde(rename = "string[]")]
    StringList,
    /// A JSON object.
    Object,
    /// One of the `enum` presets, or `{width, height}` in pixels.
    ImageSize,
}

/// One input parameter of an endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: ParamType,
    /// The values it takes, when fal lists them.
    #[serde(default, rename = "enum")]
    pub choices: Option<Vec<String>>,
    /// Lower bound of a number.
    #[serde(default)]
    pub min: Option<f64>,
    /// Upper bound of a number.
    #[serde(default)]
    pub max: Option<f64>,
    /// Whether fal refuses a body without it.
    #[serde(default)]
    pub required: bool,
}

/// What an endpoint's result looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum OutputShape {
    /// `{video: {url, content_type, file_name, file_size}, seed?}`.
    Video {
        /// Whether the result carries the seed.
        seed: bool,
    },
    /// `{images: [{url, content_type, width?, height?}], seed?}`.
    Images {
        /// Whether each image carries its width and height.
        dimensions: bool,
        /// Whether the result carries the seed.
        seed: bool,
    },
}

/// One fal endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Where its schema was read.
    pub source: String,
    /// Its input parameters.
    pub input: BTreeMap<String, Param>,
    /// Its output.
    pub output: OutputShape,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointsFile {
    endpoints: BTreeMap<String, Endpoint>,
}

static ENDPOINTS: LazyLock<BTreeMap<String, Endpoint>> = LazyLock::new(|| {
    serde_json::from_str::<EndpointsFile>(include_str!("../fal-endpoints.json"))
        .map(|f| f.endpoints)
        .unwrap_or_else(|e| panic!("fal-endpoints.json is built in and checked by a unit test: {e}"))
});

/// Every endpoint known, by id.
#[must_use]
pub fn endpoints() -> &'static BTreeMap<String, Endpoint> {
    &ENDPOINTS
}

/// The endpoint with this id.
#[must_use]
pub fn endpoint(id: &str) -> Option<&'static Endpoint> {
    ENDPOINTS.get(id)
}

/// One refusal, as fal's validation errors give it: `{loc, msg, type}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Where: `["body", "<parameter>"]`.
    pub loc: Vec<String>,
    /// What is wrong.
    pub msg: String,
    /// A machine-readable kind (`missing`, `extra_forbidden`, `enum`, `type_error`, …).
    #[serde(rename = "type")]
    pub kind: String,
}

fn violation(param: &str, kind: &str, msg: String) -> Violation {
    Violation { loc: vec!["body".into(), param.into()], msg, kind: kind.into() }
}

fn check(name: &str, param: &Param, value: &Value) -> Option<Violation> {
    let wrong = |expected: &str| Some(violation(name, "type_error", format!("Input should be {expected}")));
    let in_enum = |text: &str| param.choices.as_ref().is_none_or(|c| c.iter().any(|v| v == text));
    match (param.kind, value) {
        (ParamType::String, Value::String(s)) if !in_enum(s) => Some(violation(
            name,
            "enum",
            format!("Input should be one of {}", param.choices.as_deref().unwrap_or_default().join(", ")),
        )),
        (ParamType::String, Value::String(_)) => None,
        (ParamType::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => in_range(name, param, n.as_f64()),
        (ParamType::Number, Value::Number(n)) => in_range(name, param, n.as_f64()),
        (ParamType::Boolean, Value::Bool(_)) | (ParamType::Object, Value::Object(_)) => None,
        (ParamType::StringList, Value::Array(items)) if items.iter().all(Value::is_string) => None,
        (ParamType::ImageSize, Value::String(s)) if in_enum(s) => None,
        (ParamType::ImageSize, Value::Object(size))
            if size.keys().all(|k| k == "width" || k == "height") && size.values().all(|v| v.is_u64()) =>
        {
            None
        }
        (ParamType::String, _) => wrong("a valid string"),
        (ParamType::Integer, _) => wrong("a valid integer"),
        (ParamType::Number, _) => wrong("a valid number"),
        (ParamType::Boolean, _) => wrong("a valid boolean"),
        (ParamType::Object, _) => wrong("a valid dictionary"),
        (ParamType::StringList, _) => wrong("a valid list of strings"),
        (ParamType::ImageSize, _) => wrong("an image size preset or {width, height}"),
    }
}

fn in_range(name: &str, param: &Param, value: Option<f64>) -> Option<Violation> {
    let value = value?;
    let low = param.min.is_some_and(|min| value < min);
    let high = param.max.is_some_and(|max| value > max);
    (low || high).then(|| {
        violation(
            name,
            "range",
            format!("Input should be between {} and {}", param.min.unwrap_or(f64::MIN), param.max.unwrap_or(f64::MAX)),
        )
    })
}

impl Endpoint {
    /// Checks a body as fal's validation would: every required parameter present, no unknown
    /// one, each of its type and among its values or within its range.
    ///
    /// # Errors
    /// Every violation found, in parameter order.
    pub fn validate(&self, body: &Value) -> Result<(), Vec<Violation>> {
        let Value::Object(body) = body else {
            return Err(vec![Violation {
                loc: vec!["body".into()],
                msg: "Input should be a valid dictionary".into(),
                kind: "dict_type".into(),
            }]);
        };
        let mut violations: Vec<Violation> = self
            .input
            .iter()
            .filter(|(name, param)| param.required && !body.contains_key(*name))
            .map(|(name, _)| violation(name, "missing", "Field required".into()))
            .collect();
        for (name, value) in body {
            match self.input.get(name) {
                None => violations.push(violation(name, "extra_forbidden", "Extra inputs are not permitted".into())),
                Some(param) => violations.extend(check(name, param, value)),
            }
        }
        if violations.is_empty() { Ok(()) } else { Err(violations) }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_endpoint_names_its_source_and_takes_a_prompt() {
        assert!(!endpoints().is_empty());
        for (id, endpoint) in endpoints() {
            assert!(endpoint.source.contains("fal-js"), "{id}");
            assert!(endpoint.input.get("prompt").is_some_and(|p| p.required), "{id}");
        }
    }

    #[test]
    fn validation_refuses_what_fal_refuses() {
        let fast = endpoint("bytedance/seedance-2.0/fast/text-to-video").unwrap();
        assert!(fast.validate(&json!({"prompt": "a", "duration": "5", "resolution": "720p"})).is_ok());
        let kinds = |body: Value| -> Vec<String> {
            fast.validate(&body).unwrap_err().into_iter().map(|v| format!("{}:{}", v.loc[1], v.kind)).collect()
        };
        assert_eq!(kinds(json!({"resolution": "1080p"})), ["prompt:missing", "resolution:enum"]);
        assert_eq!(kinds(json!({"prompt": "a", "negative_prompt": "x"})), ["negative_prompt:extra_forbidden"]);
        assert_eq!(kinds(json!({"prompt": "a", "duration": 5})), ["duration:type_error"]);
        let ideogram = endpoint("fal-ai/ideogram/v3").unwrap();
        assert!(ideogram.validate(&json!({"prompt": "a", "image_size": {"width": 512, "height": 512}})).is_ok());
        assert!(ideogram.validate(&json!({"prompt": "a", "image_size": "square_hd"})).is_ok());
        assert!(ideogram.validate(&json!({"prompt": "a", "aspect_ratio": "1:1"})).is_err());
        let flux = endpoint("fal-ai/flux-pro/v1.1-ultra").unwrap();
        assert!(flux.validate(&json!({"prompt": "a", "image_prompt_strength": 1.5})).is_err());
    }
}
