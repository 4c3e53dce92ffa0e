//! OpenAI's wire types for images and videos, as OpenAI's published API document describes them
//! and the official Python client (openai 3.57.0) sends and reads them: `CreateImageRequest` and
//! `ImagesResponse`, `CreateVideoRequest` and `Video`, `VideoListResponse`, `DeletedVideoResource`,
//! `ListModelsResponse`, and OpenAI's error
//! envelope. Requests refuse parameters OpenAI's API does not have; the edge maps them onto the
//! native requests.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::numbers;
use crate::routing::ProviderPreference;

/// How an image is returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    /// A link to the file (the default).
    #[default]
    Url,
    /// The file's bytes, base64.
    B64Json,
}

/// `POST /openai/v1/images/generations`, and the text fields of `POST /openai/v1/images/edits`
/// (whose form also carries 1 to 16 PNG, JPEG, WebP or GIF files named `image` or `image[]`, 20
/// MiB in all). `quality`, `style`, `user`, `background`, `moderation`, `input_fidelity`,
/// `output_format` and `output_compression` are accepted and ignored, so that tools that always
/// send them work.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = OpenAiImageRequest)]
pub struct ImagesRequest {
    /// A genjobs model id (`GET /openai/v1/models`); the native default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What to draw: 1 to 10,000 characters after trimming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 10000)]
    pub prompt: Option<String>,
    /// Number of images, 1 to 4.
    #[serde(default, deserialize_with = "numbers::optional_u32_or_text", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 4)]
    pub n: Option<u32>,
    /// `WxH`, mapped to the model's nearest aspect ratio; or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "1024x1024")]
    pub size: Option<String>,
    /// `url` (default) or `b64_json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "url")]
    pub response_format: Option<ResponseFormat>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub quality: Option<Value>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub style: Option<Value>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub user: Option<Value>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub background: Option<Value>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub moderation: Option<Value>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub input_fidelity: Option<Value>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub output_format: Option<Value>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub output_compression: Option<Value>,
    /// Which of the model's routes the job may take, and how it chooses among them.
    #[serde(default, deserialize_with = "crate::routing::object_or_text", skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderPreference>,
}

/// `POST /openai/v1/videos`, from JSON or from a form (whose values are all text).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = OpenAiVideoRequest)]
pub struct VideoRequest {
    /// A genjobs video model id; the native default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What to film: 1 to 10,000 characters after trimming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 10000)]
    pub prompt: Option<String>,
    /// Seconds of video, within the model's range (an integer, or its text).
    #[serde(default, deserialize_with = "numbers::optional_u32_or_text", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "4")]
    pub seconds: Option<u32>,
    /// `WxH`: the model's nearest aspect ratio and resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "1280x720")]
    pub size: Option<String>,
    /// Which of the model's routes the job may take, and how it chooses among them.
    #[serde(default, deserialize_with = "crate::routing::object_or_text", skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderPreference>,
}

/// One image of [`ImagesResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiImage)]
#[serde(untagged)]
pub enum ImageData {
    /// `response_format: url`.
    Url {
        /// Where the image is served.
        url: String,
    },
    /// `response_format: b64_json`.
    B64Json {
        /// The image's bytes, base64.
        b64_json: String,
    },
}

/// The answer of `POST /openai/v1/images/generations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiImagesResponse)]
pub struct ImagesResponse {
    /// When the job was accepted, in Unix seconds.
    pub created: i64,
    /// The images.
    pub data: Vec<ImageData>,
}

/// Why a video failed, as OpenAI's `Video.error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiVideoError)]
pub struct VideoError {
    /// The job's error code, in OpenAI's lower case; `canceled` for a canceled job.
    pub code: String,
    /// For people.
    pub message: String,
}

/// OpenAI's `Video` object for a video job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiVideo)]
pub struct VideoObject {
    /// The job id.
    pub id: String,
    /// Always `video`.
    pub object: String,
    /// `queued`, `in_progress`, `completed` or `failed` (a canceled job is `failed`).
    pub status: String,
    /// 0 to 100.
    #[schema(maximum = 100)]
    pub progress: u8,
    /// The model.
    pub model: String,
    /// Acceptance, in Unix seconds.
    pub created_at: i64,
    /// When the job ended, in Unix seconds; null until then.
    pub completed_at: Option<i64>,
    /// Never: outputs do not expire here while the job is kept.
    pub expires_at: Option<i64>,
    /// Why it failed.
    pub error: Option<VideoError>,
    /// Seconds of video, as text (OpenAI's `VideoSeconds`).
    pub seconds: String,
    /// `WxH` of the video, from its aspect ratio and resolution.
    pub size: String,
    /// The prompt.
    pub prompt: String,
    /// Never: no remixes here.
    pub remixed_from_video_id: Option<String>,
}

/// The answer of `GET /openai/v1/videos`: a page of the caller's videos.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiVideoList)]
pub struct VideoList {
    /// Always `list`.
    pub object: String,
    /// The videos, in the page's order.
    pub data: Vec<VideoObject>,
    /// The first video's id; null for an empty page.
    pub first_id: Option<String>,
    /// The last video's id (the `after` of the next page); null for an empty page.
    pub last_id: Option<String>,
    /// Whether more videos follow the last one.
    pub has_more: bool,
}

/// The answer of `DELETE /openai/v1/videos/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiVideoDeleted)]
pub struct VideoDeleted {
    /// The video's id.
    pub id: String,
    /// Always `video.deleted`.
    pub object: String,
    /// Always true.
    pub deleted: bool,
}

/// One model of [`ModelList`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiModel)]
pub struct ModelObject {
    /// The model id.
    pub id: String,
    /// Always `model`.
    pub object: String,
    /// Unix seconds; catalog models carry no creation time, so 0.
    pub created: i64,
    /// Who runs it: the provider.
    pub owned_by: String,
}

/// The answer of `GET /openai/v1/models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiModelList)]
pub struct ModelList {
    /// Always `list`.
    pub object: String,
    /// The catalog's models.
    pub data: Vec<ModelObject>,
}

/// An error of the OpenAI-compatible edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiError)]
pub struct ErrorEnvelope {
    /// What went wrong.
    pub error: ErrorObject,
}

/// `{message, type, param, code}`, every key present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiErrorObject)]
pub struct ErrorObject {
    /// A sentence for people.
    pub message: String,
    /// OpenAI's class of error, e.g. `invalid_request_error`, `insufficient_quota`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The parameter at fault, or null.
    #[schema(required = true)]
    pub param: Option<String>,
    /// The native error code in lower case, e.g. `not_enough_credits`.
    pub code: String,
}
