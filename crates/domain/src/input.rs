//! The validated inputs of a generation: a leaf module, so that the catalog (which prices and
//! routes them), requests (which produce them) and jobs (which keep them) need not import each
//! other.

use serde_json::{Map, Value};

/// The validated inputs of a generation, defaults applied; what the job keeps of the request.
#[derive(Debug, Clone, PartialEq)]
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

/// The fields of a request a provider's route may map to its own parameters, by their names in
/// the request body.
pub const MAPPABLE_FIELDS: [&str; 7] =
    ["prompt", "negative_prompt", "aspect_ratio", "resolution", "duration_sec", "n", "seed"];

impl GenerationInput {
    /// Each of [`MAPPABLE_FIELDS`] with its value as JSON, `None` where the input leaves it
    /// unset: what a provider adapter translates through a route's mapping.
    #[must_use]
    pub fn mappable_fields(&self) -> [(&'static str, Option<Value>); 7] {
        let [prompt, negative_prompt, aspect_ratio, resolution, duration_sec, n, seed] = MAPPABLE_FIELDS;
        [
            (prompt, Some(Value::String(self.prompt.clone()))),
            (negative_prompt, self.negative_prompt.clone().map(Value::String)),
            (aspect_ratio, Some(Value::String(self.aspect_ratio.clone()))),
            (resolution, self.resolution.clone().map(Value::String)),
            (duration_sec, self.duration_sec.map(Value::from)),
            (n, self.n.map(Value::from)),
            (seed, self.seed.map(Value::from)),
        ]
    }

    /// The reference images as the value of one provider parameter: all of them as a list when
    /// the parameter takes a `list`, else the first alone; `None` without reference images.
    #[must_use]
    pub fn image_inputs_value(&self, list: bool) -> Option<Value> {
        let first = self.image_inputs.first()?;
        Some(if list { Value::from(self.image_inputs.clone()) } else { Value::String(first.clone()) })
    }
}
