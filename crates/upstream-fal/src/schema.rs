//! fal's endpoints as this adapter knows them: for each endpoint id the catalog routes to, the
//! input schema read from fal's published types (`fal-endpoints.json` names the source of each)
//! and the shape of its output. The simulator refuses by the same data what fal would refuse, so
//! the catalog's routes and fal's schemas cannot drift apart unnoticed.
//!
//! An operator adds the schemas of other endpoints in a file of the same form
//! (`GENJOBS_FAL_SCHEMAS`, loaded once at start by [`add_operator_endpoints`]); an operator's
//! schema replaces a shipped one of the same id, since fal changes its endpoints faster than
//! genjobs ships. [`from_openapi`] reads one endpoint's schema from the OpenAPI document fal
//! serves for it, for `genjobs models import fal --online`: checking a route never goes online.

use std::collections::BTreeMap;
use std::sync::{LazyLock, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The type of one input parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: ParamType,
    /// The values it takes, when fal lists them.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<String>>,
    /// Lower bound of a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Upper bound of a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Whether fal refuses a body without it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// What an endpoint's result looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Where its schema was read.
    pub source: String,
    /// Its input parameters.
    pub input: BTreeMap<String, Param>,
    /// Its output.
    pub output: OutputShape,
}

/// A file of endpoint schemas: `fal-endpoints.json`, or an operator's `GENJOBS_FAL_SCHEMAS`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointsFile {
    /// The endpoints, by id.
    pub endpoints: BTreeMap<String, Endpoint>,
}

static ENDPOINTS: LazyLock<BTreeMap<String, Endpoint>> = LazyLock::new(|| {
    serde_json::from_str::<EndpointsFile>(include_str!("../fal-endpoints.json"))
        .map(|f| f.endpoints)
        .unwrap_or_else(|e| panic!("fal-endpoints.json is built in and checked by a unit test: {e}"))
});

static OPERATOR_ENDPOINTS: OnceLock<BTreeMap<String, Endpoint>> = OnceLock::new();

/// The endpoints shipped with genjobs, by id.
#[must_use]
pub fn endpoints() -> &'static BTreeMap<String, Endpoint> {
    &ENDPOINTS
}

/// The endpoint with this id: the operator's schema of it, else the shipped one.
#[must_use]
pub fn endpoint(id: &str) -> Option<&'static Endpoint> {
    OPERATOR_ENDPOINTS.get().and_then(|added| added.get(id)).or_else(|| ENDPOINTS.get(id))
}

/// Adds the operator's endpoint schemas, once for the life of the process: they are the
/// service's settings, read at start like the rest. Adding the same schemas again is allowed
/// (a process may start more than one service on the same settings).
///
/// # Errors
/// When other schemas were added before.
pub fn add_operator_endpoints(file: EndpointsFile) -> Result<(), String> {
    let added = OPERATOR_ENDPOINTS.get_or_init(|| file.endpoints.clone());
    if *added == file.endpoints {
        Ok(())
    } else {
        Err("other fal endpoint schemas were loaded before in this process".to_owned())
    }
}

/// Reads a file of endpoint schemas (the form of `fal-endpoints.json`).
///
/// # Errors
/// Why the text is not such a file.
pub fn read_endpoints_file(text: &str) -> Result<EndpointsFile, String> {
    serde_json::from_str(text).map_err(|e| format!("not a file of fal endpoint schemas: {e}"))
}

/// One endpoint's schema from the OpenAPI document fal serves for it (its queue API: the
/// `POST /{endpoint}` body, and the result of `GET /{endpoint}/requests/{request_id}`), with
/// `source` naming where it was read.
///
/// # Errors
/// What the document lacks: the endpoint's body schema, or a result of images or a video.
pub fn from_openapi(endpoint_id: &str, document: &Value, source: &str) -> Result<Endpoint, String> {
    let resolve = |schema: &Value| -> Value { resolved(document, schema) };
    let paths = &document["paths"];
    let body = &paths[format!("/{endpoint_id}")]["post"]["requestBody"]["content"]["application/json"]["schema"];
    let body = resolve(body);
    let properties = body["properties"]
        .as_object()
        .ok_or_else(|| format!("the document has no input schema for POST /{endpoint_id}"))?;
    let required: Vec<&str> = body["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let input = properties
        .iter()
        .map(|(name, property)| {
            let mut param = openapi_param(document, property);
            param.required = required.contains(&name.as_str());
            (name.clone(), param)
        })
        .collect();
    let result = &paths[format!("/{endpoint_id}/requests/{{request_id}}")]["get"]["responses"]["200"]["content"]["application/json"]
        ["schema"];
    let result = resolve(result);
    let has = |name: &str| result["properties"].get(name).is_some();
    let output = if has("video") {
        OutputShape::Video { seed: has("seed") }
    } else if has("images") {
        let image = resolve(&result["properties"]["images"]["items"]);
        OutputShape::Images { dimensions: image["properties"].get("width").is_some(), seed: has("seed") }
    } else {
        return Err(format!("the result of {endpoint_id} is neither `images` nor a `video`"));
    };
    Ok(Endpoint { source: source.to_owned(), input, output })
}

/// Where fal serves the OpenAPI document of each endpoint, given as `?endpoint_id=`.
pub const FAL_SCHEMA_URL: &str = "https://fal.ai/api/openapi/queue/openapi.json";

/// Reads the schema of `endpoint_id` from the OpenAPI document fal serves for it at `url`
/// ([`FAL_SCHEMA_URL`] in production), within 10 s.
///
/// # Errors
/// Why it could not be read: no answer, an answer other than 200, or a document without the
/// endpoint's body or result.
pub async fn fetch_online(url: &str, endpoint_id: &str) -> Result<Endpoint, String> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let response = client
        .get(url)
        .query(&[("endpoint_id", endpoint_id)])
        .send()
        .await
        .map_err(|e| format!("{url} did not answer: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url} answered {} for {endpoint_id}", response.status()));
    }
    let document: Value = response.json().await.map_err(|e| format!("{url} did not answer JSON: {e}"))?;
    from_openapi(endpoint_id, &document, &format!("{url}?endpoint_id={endpoint_id}"))
}

/// `schema` with a `$ref` into the document's components followed (one level: fal's documents
/// name each schema once).
fn resolved(document: &Value, schema: &Value) -> Value {
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => document["components"]["schemas"][name].clone(),
        None => schema.clone(),
    }
}

/// One property of fal's input schema as a [`Param`]. A property that may be null takes the
/// type of its other alternative; fal's image size is a preset or `{width, height}`.
fn openapi_param(document: &Value, property: &Value) -> Param {
    let alternatives: Vec<Value> = match property["anyOf"].as_array() {
        Some(any) => any.iter().map(|a| resolved(document, a)).filter(|a| a["type"] != "null").collect(),
        None => vec![resolved(document, property)],
    };
    let choices: Option<Vec<String>> = alternatives
        .iter()
        .find_map(|a| a["enum"].as_array())
        .map(|values| values.iter().filter_map(Value::as_str).map(str::to_owned).collect());
    let is_size = |a: &Value| a["properties"].get("width").is_some() && a["properties"].get("height").is_some();
    let kind = if alternatives.iter().any(is_size) {
        ParamType::ImageSize
    } else {
        match alternatives.first().and_then(|a| a["type"].as_str()) {
            Some("integer") => ParamType::Integer,
            Some("number") => ParamType::Number,
            Some("boolean") => ParamType::Boolean,
            Some("array") => ParamType::StringList,
            Some("object") => ParamType::Object,
            _ => ParamType::String,
        }
    };
    let bound = |name: &str| alternatives.iter().find_map(|a| a[name].as_f64());
    Param { kind, choices, min: bound("minimum"), max: bound("maximum"), required: false }
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

    /// A document in the form fal serves per endpoint id, for an endpoint genjobs does not ship.
    fn served_document() -> Value {
        serde_json::from_str(include_str!("../fixtures/fal-openapi-example.json")).unwrap()
    }

    #[test]
    fn an_endpoint_reads_from_the_openapi_document_fal_serves() {
        let endpoint = from_openapi("fal-ai/example/turbo", &served_document(), "served").unwrap();
        assert_eq!(endpoint.output, OutputShape::Images { dimensions: true, seed: true });
        let kinds: Vec<(&str, ParamType, bool)> =
            endpoint.input.iter().map(|(name, p)| (name.as_str(), p.kind, p.required)).collect();
        assert_eq!(
            kinds,
            [
                ("enable_safety_checker", ParamType::Boolean, false),
                ("guidance", ParamType::Number, false),
                ("image_size", ParamType::ImageSize, false),
                ("image_urls", ParamType::StringList, false),
                ("num_images", ParamType::Integer, false),
                ("prompt", ParamType::String, true),
            ]
        );
        assert_eq!(endpoint.input["num_images"].max, Some(4.0));
        assert_eq!(endpoint.input["guidance"].max, Some(20.0));
        assert_eq!(
            endpoint.input["image_size"].choices.as_deref(),
            Some(&["square_hd".to_owned(), "landscape_16_9".to_owned()][..])
        );
        assert!(endpoint.validate(&json!({"prompt": "a", "image_size": {"width": 512, "height": 512}})).is_ok());
        assert!(endpoint.validate(&json!({"prompt": "a", "num_images": 5})).is_err());

        let round_trip = read_endpoints_file(
            &serde_json::to_string(&EndpointsFile { endpoints: [("x".to_owned(), endpoint.clone())].into() }).unwrap(),
        )
        .unwrap();
        assert_eq!(round_trip.endpoints["x"], endpoint);
    }

    #[test]
    fn a_document_without_the_endpoints_body_or_result_is_refused() {
        assert!(from_openapi("fal-ai/other", &served_document(), "served").unwrap_err().contains("POST /fal-ai/other"));
        let mut video_less = served_document();
        video_less["components"]["schemas"]["TurboOutput"]["properties"] = json!({"text": {"type": "string"}});
        assert!(from_openapi("fal-ai/example/turbo", &video_less, "served").unwrap_err().contains("neither"));
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
