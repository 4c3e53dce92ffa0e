//! The bodies of the generation endpoints, which their quote endpoints take too. A field the
//! endpoint does not have is refused; `null` is the same as absent; the domain's rules (ranges,
//! choices, the catalog) are the edge's to apply.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::numbers;
use crate::routing::ProviderPreference;

/// The body of `POST /api/v1/images/generations` (and of its quote). Fields left `None` take the
/// model's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ImageGenerationRequest)]
pub struct ImageRequest {
    /// Description of the image: 1 to 10,000 characters after trimming.
    #[serde(default)]
    #[schema(max_length = 10000)]
    pub prompt: String,
    /// Model id (`GET /api/v1/models?modality=image`); the catalog's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Aspect ratio, e.g. `1:1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aspect_ratio: Option<String>,
    /// Number of images, 1 to 4.
    #[serde(default, deserialize_with = "numbers::optional_u32", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 4)]
    pub n: Option<u32>,
    /// Seed, 0 to 2^32-1, for repeatable results where the model supports it.
    #[serde(default, deserialize_with = "numbers::optional_u64", skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 4294967295_u64)]
    pub seed: Option<u64>,
    /// Reference image URLs (`http` or `https`, at most 2,048 characters each), up to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 10)]
    pub image_inputs: Option<Vec<String>>,
    /// What to avoid, up to 2,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub negative_prompt: Option<String>,
    /// Model-specific parameters, as the model's form fields name them (at most 64 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub extra: Option<Map<String, Value>>,
    /// Where to POST the job's end (`job.succeeded`, `job.failed` or `job.canceled`), signed
    /// with the account's webhook secret: an absolute `http` or `https` URL of at most 2,048
    /// characters whose host is not, and does not resolve to, a loopback, private, link-local,
    /// unspecified or multicast address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2048)]
    pub webhook_url: Option<String>,
    /// `normal` (the default) or `low`: a low job goes to its provider only while no normal job
    /// waits for a slot there (and fal is asked to run it after its normal requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^(normal|low)$", example = "low")]
    pub priority: Option<String>,
    /// Seconds, 1 to 86,400: a job that has not started running at its provider this long after
    /// its acceptance (still waiting for capacity, or still in the provider's queue) fails with
    /// `DEADLINE_EXCEEDED`, stopped at the provider and everything held released.
    #[serde(default, deserialize_with = "numbers::optional_u32", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 86400, example = 60)]
    pub start_within_secs: Option<u32>,
    /// Which of the model's routes the job may take, and how it chooses among them.
    #[serde(default, deserialize_with = "crate::routing::object_or_text", skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderPreference>,
}

impl ImageRequest {
    /// A request for `prompt` with every other field left to the model.
    #[must_use]
    pub fn new(prompt: impl Into<String>) -> Self {
        Self { prompt: prompt.into(), ..Self::default() }
    }
}

/// The body of `POST /api/v1/video/generations` (and of its quote). Fields left `None` take the
/// model's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = VideoGenerationRequest)]
pub struct VideoRequest {
    /// Description of the video: 1 to 10,000 characters after trimming.
    #[serde(default)]
    #[schema(max_length = 10000)]
    pub prompt: String,
    /// Model id (`GET /api/v1/models?modality=video`); the catalog's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Seconds of video; one of the model's durations. A form may send the text of a `select`
    /// option (`"10"`).
    #[serde(default, deserialize_with = "numbers::optional_u32_or_text", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub duration_sec: Option<u32>,
    /// Aspect ratio, e.g. `16:9`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aspect_ratio: Option<String>,
    /// Resolution, e.g. `720p`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// Reference image URLs (`http` or `https`, at most 2,048 characters each), up to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 10)]
    pub image_inputs: Option<Vec<String>>,
    /// Seed, 0 to 2^32-1, for repeatable results where the model supports it.
    #[serde(default, deserialize_with = "numbers::optional_u64", skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 4294967295_u64)]
    pub seed: Option<u64>,
    /// What to avoid, up to 2,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub negative_prompt: Option<String>,
    /// Model-specific parameters, as the model's form fields name them (at most 64 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub extra: Option<Map<String, Value>>,
    /// Where to POST the job's end (`job.succeeded`, `job.failed` or `job.canceled`), signed
    /// with the account's webhook secret: an absolute `http` or `https` URL of at most 2,048
    /// characters whose host is not, and does not resolve to, a loopback, private, link-local,
    /// unspecified or multicast address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2048)]
    pub webhook_url: Option<String>,
    /// `normal` (the default) or `low`: a low job goes to its provider only while no normal job
    /// waits for a slot there (and fal is asked to run it after its normal requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^(normal|low)$", example = "low")]
    pub priority: Option<String>,
    /// Seconds, 1 to 86,400: a job that has not started running at its provider this long after
    /// its acceptance (still waiting for capacity, or still in the provider's queue) fails with
    /// `DEADLINE_EXCEEDED`, stopped at the provider and everything held released.
    #[serde(default, deserialize_with = "numbers::optional_u32", skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 86400, example = 60)]
    pub start_within_secs: Option<u32>,
    /// Which of the model's routes the job may take, and how it chooses among them.
    #[serde(default, deserialize_with = "crate::routing::object_or_text", skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderPreference>,
}

impl VideoRequest {
    /// A request for `prompt` with every other field left to the model.
    #[must_use]
    pub fn new(prompt: impl Into<String>) -> Self {
        Self { prompt: prompt.into(), ..Self::default() }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read<T: serde::de::DeserializeOwned>(body: Value) -> Result<T, String> {
        serde_path_to_error::deserialize(body).map_err(|e| e.path().to_string())
    }

    #[test]
    fn whole_numbers_are_read_from_numbers_whole_floats_and_for_durations_text() {
        let video: VideoRequest = read(json!({"prompt": "a", "duration_sec": "10", "seed": 4.0})).unwrap();
        assert_eq!((video.duration_sec, video.seed), (Some(10), Some(4)));
        let image: ImageRequest = read(json!({"prompt": "a", "n": null, "seed": 7})).unwrap();
        assert_eq!((image.n, image.seed), (None, Some(7)));
    }

    #[test]
    fn refusals_carry_the_path_of_the_field() {
        for (body, path) in [
            (json!({"prompt": 5}), "prompt"),
            (json!({"prompt": "a", "seed": -1}), "seed"),
            (json!({"prompt": "a", "seed": "7"}), "seed"),
            (json!({"prompt": "a", "n": 2.5}), "n"),
            (json!({"prompt": "a", "n": 5_000_000_000_u64}), "n"),
            (json!({"prompt": "a", "image_inputs": [5]}), "image_inputs[0]"),
            (json!({"prompt": "a", "extra": [1]}), "extra"),
            (json!({"prompt": "a", "surprise": true}), "surprise"),
            (json!({"prompt": "a", "duration_sec": 5}), "duration_sec"),
        ] {
            assert_eq!(read::<ImageRequest>(body.clone()).unwrap_err(), path, "{body}");
        }
        assert_eq!(read::<VideoRequest>(json!({"prompt": "a", "duration_sec": "five"})).unwrap_err(), "duration_sec");
    }

    #[test]
    fn a_request_written_by_a_client_reads_back_the_same() {
        let request = VideoRequest { duration_sec: Some(8), seed: Some(3), ..VideoRequest::new("waves") };
        let written = serde_json::to_value(&request).unwrap();
        assert_eq!(written, json!({"prompt": "waves", "duration_sec": 8, "seed": 3}));
        assert_eq!(read::<VideoRequest>(written).unwrap(), request);
    }
}
