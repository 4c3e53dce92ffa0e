//! Replicate's models as this adapter knows them: for each official model a route may name, its
//! published input schema (`replicate-models.json` cites the source and version of each), held
//! so that routes are checked without calling Replicate and so that the simulator refuses by the
//! same data what Replicate refuses ([`ModelSchema::validate`]).
//!
//! A schema is the `Input` object of the model's OpenAPI schema with its enums inlined: Replicate
//! refuses a prediction whose input has a key the schema does not list (`additionalProperties`
//! is false for cog models), a value of another type, outside its `enum` or its bounds, or a
//! required key left out, answering 422 with one `invalid_fields` item per fault.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The JSON type of one input property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PropertyType {
    /// A JSON string.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
}

impl PropertyType {
    fn name(self) -> &'static str {
        match self {
            PropertyType::String => "string",
            PropertyType::Integer => "integer",
            PropertyType::Number => "number",
            PropertyType::Boolean => "boolean",
        }
    }

    fn admits(self, value: &Value) -> bool {
        match self {
            PropertyType::String => value.is_string(),
            PropertyType::Integer => value.is_i64() || value.is_u64(),
            PropertyType::Number => value.is_number(),
            PropertyType::Boolean => value.is_boolean(),
        }
    }
}

/// One input property of a model.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Property {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: PropertyType,
    /// The values it takes, when the schema lists them.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<Value>>,
    /// Lower bound of a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    /// Upper bound of a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<f64>,
    /// `uri` for a URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Whether `null` is taken (as leaving the key out).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nullable: bool,
    /// The value the model uses when the key is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// What the schema says of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A model's input object.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InputSchema {
    /// Always `object`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Keys an input must have.
    #[serde(default)]
    pub required: Vec<String>,
    /// Whether keys the schema does not list are taken.
    #[serde(rename = "additionalProperties")]
    pub additional_properties: bool,
    /// The keys it takes.
    pub properties: BTreeMap<String, Property>,
}

/// One official model.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSchema {
    /// Where its schema was read.
    pub source: String,
    /// Which version of the model it describes.
    pub version: String,
    /// Its input.
    pub input: InputSchema,
    /// Its output's schema: `{type: string, format: uri}` for one file, `{type: array, items:
    /// {…}}` for several.
    pub output: Value,
}

/// One fault of an input, as Replicate's 422 lists it in `invalid_fields`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct InvalidField {
    /// The kind of fault (`required`, `invalid_type`, `enum`, `number_gte`, `number_lte`,
    /// `format`, `additional_property_not_allowed`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Where: `input` or `input.<key>`.
    pub field: String,
    /// What is wrong, for a person.
    pub description: String,
}

impl InvalidField {
    fn new(kind: &str, field: &str, description: String) -> Self {
        Self { kind: kind.to_owned(), field: field.to_owned(), description }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    models: BTreeMap<String, ModelSchema>,
}

static MODELS: LazyLock<BTreeMap<String, ModelSchema>> = LazyLock::new(|| {
    serde_json::from_str::<ModelsFile>(include_str!("../replicate-models.json"))
        .map(|f| f.models)
        .unwrap_or_else(|e| panic!("replicate-models.json is built in and checked by a unit test: {e}"))
});

/// Every model this adapter holds a schema of, by `owner/name`.
#[must_use]
pub fn models() -> &'static BTreeMap<String, ModelSchema> {
    &MODELS
}

/// The schema of the official model `owner/name`, if held.
#[must_use]
pub fn model(name: &str) -> Option<&'static ModelSchema> {
    MODELS.get(name)
}

impl ModelSchema {
    /// Whether the model's output is a list of files (else one file).
    #[must_use]
    pub fn outputs_list(&self) -> bool {
        self.output.get("type").and_then(Value::as_str) == Some("array")
    }

    /// Checks an input as Replicate does before it creates a prediction.
    ///
    /// # Errors
    /// Every fault found, in key order.
    pub fn validate(&self, input: &Value) -> Result<(), Vec<InvalidField>> {
        let Some(input) = input.as_object() else {
            return Err(vec![InvalidField::new("invalid_type", "input", "Invalid type. Expected: object".to_owned())]);
        };
        let mut faults: Vec<InvalidField> = self
            .input
            .required
            .iter()
            .filter(|key| input.get(*key).is_none_or(Value::is_null))
            .map(|key| InvalidField::new("required", "input", format!("{key} is required")))
            .collect();
        for (key, value) in input {
            match self.input.properties.get(key) {
                Some(property) => faults.extend(property.check(key, value)),
                None if !self.input.additional_properties => faults.push(InvalidField::new(
                    "additional_property_not_allowed",
                    "input",
                    format!("Additional property {key} is not allowed"),
                )),
                None => {}
            }
        }
        if faults.is_empty() { Ok(()) } else { Err(faults) }
    }

    /// Checks an input, as one sentence naming every fault.
    ///
    /// # Errors
    /// The sentence.
    pub fn validate_keys(&self, input: &Map<String, Value>) -> Result<(), String> {
        self.validate(&Value::Object(input.clone())).map_err(|faults| describe(&faults))
    }
}

impl Property {
    /// The fault of `value` as the property `key`, if any.
    #[must_use]
    pub fn check(&self, key: &str, value: &Value) -> Option<InvalidField> {
        let field = format!("input.{key}");
        if value.is_null() && self.nullable {
            return None;
        }
        if !self.kind.admits(value) {
            return Some(InvalidField::new(
                "invalid_type",
                &field,
                format!("Invalid type. Expected: {}, given: {}", self.kind.name(), json_type(value)),
            ));
        }
        if let Some(choices) = self.choices.as_ref().filter(|c| !c.contains(value)) {
            let listed: Vec<String> = choices.iter().map(Value::to_string).collect();
            return Some(InvalidField::new(
                "enum",
                &field,
                format!("{key} must be one of the following: {}", listed.join(", ")),
            ));
        }
        let number = value.as_f64();
        if let (Some(n), Some(min)) = (number, self.minimum)
            && n < min
        {
            return Some(InvalidField::new("number_gte", &field, format!("Must be greater than or equal to {min}")));
        }
        if let (Some(n), Some(max)) = (number, self.maximum)
            && n > max
        {
            return Some(InvalidField::new("number_lte", &field, format!("Must be less than or equal to {max}")));
        }
        let is_uri = |s: &str| s.starts_with("https://") || s.starts_with("http://") || s.starts_with("data:");
        if self.format.as_deref() == Some("uri") && !value.as_str().is_some_and(is_uri) {
            return Some(InvalidField::new("format", &field, "Does not match format 'uri'".to_owned()));
        }
        None
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Faults as Replicate's `detail` writes them: `field: description`, joined.
#[must_use]
pub fn describe(faults: &[InvalidField]) -> String {
    faults.iter().map(|f| format!("{}: {}", f.field, f.description)).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use serde_json::json;

    use super::*;

    fn ultra() -> &'static ModelSchema {
        model("black-forest-labs/flux-1.1-pro-ultra").unwrap()
    }

    #[test]
    fn the_shipped_file_reads_and_holds_the_contract_keys() {
        let keys: Vec<&str> = ultra().input.properties.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "aspect_ratio",
                "image_prompt",
                "image_prompt_strength",
                "output_format",
                "prompt",
                "raw",
                "safety_tolerance",
                "seed"
            ]
        );
        assert!(!ultra().outputs_list(), "flux-1.1-pro-ultra answers one URL");
    }

    #[test]
    fn a_good_input_passes() {
        let input = json!({"prompt": "a fox", "aspect_ratio": "16:9", "output_format": "png", "safety_tolerance": 6,
            "seed": 3, "raw": true, "image_prompt": "https://a/b.png", "image_prompt_strength": 0.5});
        assert_eq!(ultra().validate(&input), Ok(()));
        assert_eq!(ultra().validate(&json!({"prompt": "x", "seed": null})), Ok(()));
    }

    #[test]
    fn every_fault_is_named_as_replicate_names_it() {
        let input = json!({"aspect_ratio": "2:1", "output_format": "webp", "safety_tolerance": 7, "seed": "1",
            "raw": 1, "image_prompt": "not a url", "image_prompt_strength": -0.5, "num_outputs": 2});
        let faults = ultra().validate(&input).unwrap_err();
        let kinds: Vec<(&str, &str)> = faults.iter().map(|f| (f.kind.as_str(), f.field.as_str())).collect();
        assert_eq!(
            kinds,
            [
                ("required", "input"),
                ("enum", "input.aspect_ratio"),
                ("format", "input.image_prompt"),
                ("number_gte", "input.image_prompt_strength"),
                ("additional_property_not_allowed", "input"),
                ("enum", "input.output_format"),
                ("invalid_type", "input.raw"),
                ("number_lte", "input.safety_tolerance"),
                ("invalid_type", "input.seed"),
            ]
        );
        assert!(describe(&faults).contains("Additional property num_outputs is not allowed"));
        assert_eq!(
            ultra().validate(&json!({"prompt": "x", "safety_tolerance": 2.5})).unwrap_err()[0].kind,
            "invalid_type"
        );
    }
}
