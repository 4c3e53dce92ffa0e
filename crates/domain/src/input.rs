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
