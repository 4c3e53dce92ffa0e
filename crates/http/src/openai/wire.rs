//! OpenAI's wire types for images and videos, as OpenAI's published API document describes them
//! and the official Python client (openai 3.57.0) sends and reads them: `CreateImageRequest` and
//! `ImagesResponse`, `CreateVideoRequest` and `Video`, `ListModelsResponse`. Requests are read
//! field by field, so that a value of the wrong type is refused naming its field, then turned into
//! the native request bodies, whose validation is the same as `/api/v1`'s.

use genjobs_domain::catalog::Catalog;
use genjobs_domain::job::{Job, JobState};
use genjobs_domain::modality::Modality;
use genjobs_domain::request::{GenerationRequest, InvalidRequest, WholeNumber, resolve_model};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::sizes::Size;
use crate::dto::requests::{ImageGenerationBody, VideoGenerationBody};

/// Fields of OpenAI's image request that change nothing here: they are accepted so that tools
/// that always send them work, and ignored.
const IGNORED_IMAGE_FIELDS: &[&str] =
    &["quality", "style", "user", "background", "moderation", "output_format", "output_compression"];

/// How an image is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFormat {
    /// A link to the file (the default).
    Url,
    /// The file's bytes, base64.
    B64Json,
}

/// `POST /openai/v1/images/generations`, read. `quality`, `style`, `user`, `background`,
/// `moderation`, `output_format` and `output_compression` are accepted and ignored.
#[derive(Debug, Clone, PartialEq, ToSchema)]
#[schema(as = OpenAiImageRequest)]
pub struct ImagesRequest {
    /// A genjobs model id (`GET /openai/v1/models`); the native default when absent.
    model: Option<String>,
    /// What to draw: 1 to 10,000 characters after trimming.
    #[schema(max_length = 10000)]
    prompt: Option<String>,
    /// Number of images, 1 to 4.
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 4)]
    n: Option<WholeNumber>,
    /// `WxH`, mapped to the model's nearest aspect ratio; or `auto`.
    #[schema(value_type = Option<String>, example = "1024x1024")]
    size: Option<Size>,
    /// `url` (default) or `b64_json`.
    #[schema(value_type = Option<String>, example = "url")]
    pub response_format: ResponseFormat,
}

/// `POST /openai/v1/videos`, read from JSON or from a form (whose values are all text).
#[derive(Debug, Clone, PartialEq, ToSchema)]
#[schema(as = OpenAiVideoRequest)]
pub struct VideoRequest {
    /// A genjobs video model id; the native default when absent.
    model: Option<String>,
    /// What to film: 1 to 10,000 characters after trimming.
    #[schema(max_length = 10000)]
    prompt: Option<String>,
    /// Seconds of video, within the model's range (an integer, or its text).
    #[schema(value_type = Option<String>, example = "4")]
    seconds: Option<WholeNumber>,
    /// `WxH`: the model's nearest aspect ratio and resolution.
    #[schema(value_type = Option<String>, example = "1280x720")]
    size: Option<Size>,
}

fn object(body: &Value) -> Result<&Map<String, Value>, InvalidRequest> {
    body.as_object().ok_or_else(|| InvalidRequest::body("the body must be a JSON object"))
}

fn refuse_unknown(fields: &Map<String, Value>, known: &[&str]) -> Result<(), InvalidRequest> {
    match fields.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => Err(InvalidRequest::param(unknown, format!("unknown parameter `{unknown}`"))),
        None => Ok(()),
    }
}

fn text(fields: &Map<String, Value>, name: &str) -> Result<Option<String>, InvalidRequest> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(InvalidRequest::param(name, format!("`{name}` must be a string"))),
    }
}

/// A whole number sent as a JSON number or, as forms send it, as text.
fn number(fields: &Map<String, Value>, name: &str) -> Result<Option<WholeNumber>, InvalidRequest> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().parse().map_or(WholeNumber::Other, WholeNumber::Exact))),
        Some(Value::Number(n)) => Ok(Some(n.as_u64().map_or(WholeNumber::Other, WholeNumber::Exact))),
        Some(_) => Err(InvalidRequest::param(name, format!("`{name}` must be an integer"))),
    }
}

fn size(fields: &Map<String, Value>) -> Result<Option<Size>, InvalidRequest> {
    text(fields, "size")?.map(|s| Size::parse(&s)).transpose()
}

/// The native validation names the native fields; a client of this edge sent OpenAI's.
fn in_openai_terms(mut refused: InvalidRequest) -> InvalidRequest {
    refused.param = refused.param.map(|param| {
        match param.as_str() {
            "duration_sec" => "seconds",
            "aspect_ratio" | "resolution" => "size",
            other => other,
        }
        .to_owned()
    });
    refused
}

impl ImagesRequest {
    /// Reads the body.
    ///
    /// # Errors
    /// [`InvalidRequest`] for a body that is not an object, a parameter OpenAI's API does not
    /// have, or a value of the wrong type.
    pub fn from_json(body: &Value) -> Result<Self, InvalidRequest> {
        let fields = object(body)?;
        let known: Vec<&str> = ["model", "prompt", "n", "size", "response_format"]
            .into_iter()
            .chain(IGNORED_IMAGE_FIELDS.iter().copied())
            .collect();
        refuse_unknown(fields, &known)?;
        let response_format = match text(fields, "response_format")?.as_deref() {
            None | Some("url") => ResponseFormat::Url,
            Some("b64_json") => ResponseFormat::B64Json,
            Some(other) => {
                return Err(InvalidRequest::param(
                    "response_format",
                    format!("`response_format` must be `url` or `b64_json`, not {other:?}"),
                ));
            }
        };
        Ok(Self {
            model: text(fields, "model")?,
            prompt: text(fields, "prompt")?,
            n: number(fields, "n")?,
            size: size(fields)?,
            response_format,
        })
    }

    /// The native request: `size` becomes the model's nearest aspect ratio.
    ///
    /// # Errors
    /// [`InvalidRequest`] from the native validation, in OpenAI's parameter names.
    pub fn try_into_domain(self, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
        let model = resolve_model(self.model.as_deref(), Modality::Image, catalog)?;
        let body = ImageGenerationBody {
            prompt: self.prompt,
            model: Some(model.id.to_string()),
            aspect_ratio: self.size.and_then(|size| size.nearest_aspect_ratio(&model.aspect_ratios)),
            n: self.n,
            ..ImageGenerationBody::default()
        };
        body.try_into_domain(catalog).map_err(in_openai_terms)
    }
}

impl VideoRequest {
    /// Reads the fields of a JSON body or a form.
    ///
    /// # Errors
    /// As [`ImagesRequest::from_json`]; a reference image upload (`input_reference`) is refused:
    /// the native API takes reference images as URLs only.
    pub fn from_fields(fields: &Map<String, Value>) -> Result<Self, InvalidRequest> {
        if fields.contains_key("input_reference") {
            return Err(InvalidRequest::param(
                "input_reference",
                "`input_reference` is not supported here; pass image URLs to /api/v1/video/generations",
            ));
        }
        refuse_unknown(fields, &["model", "prompt", "seconds", "size"])?;
        Ok(Self {
            model: text(fields, "model")?,
            prompt: text(fields, "prompt")?,
            seconds: number(fields, "seconds")?,
            size: size(fields)?,
        })
    }

    /// Reads a JSON body.
    ///
    /// # Errors
    /// As [`VideoRequest::from_fields`].
    pub fn from_json(body: &Value) -> Result<Self, InvalidRequest> {
        Self::from_fields(object(body)?)
    }

    /// The native request: `seconds` is the duration; `size` becomes the model's nearest aspect
    /// ratio and, for a model with resolutions, the one nearest its shorter side.
    ///
    /// # Errors
    /// [`InvalidRequest`] from the native validation, in OpenAI's parameter names.
    pub fn try_into_domain(self, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
        let model = resolve_model(self.model.as_deref(), Modality::Video, catalog)?;
        let body = VideoGenerationBody {
            prompt: self.prompt,
            model: Some(model.id.to_string()),
            duration_sec: self.seconds,
            aspect_ratio: self.size.and_then(|size| size.nearest_aspect_ratio(&model.aspect_ratios)),
            resolution: self.size.and_then(|size| size.nearest_resolution(&model.resolutions)),
            ..VideoGenerationBody::default()
        };
        body.try_into_domain(catalog).map_err(in_openai_terms)
    }
}

/// One image of [`ImagesResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = OpenAiImagesResponse)]
pub struct ImagesResponse {
    /// When the job was accepted, in Unix seconds.
    pub created: i64,
    /// The images.
    pub data: Vec<ImageData>,
}

/// Why a video failed, as OpenAI's `Video.error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = OpenAiVideoError)]
pub struct VideoError {
    /// The job's error code, in OpenAI's lower case.
    pub code: String,
    /// For people.
    pub message: String,
}

/// OpenAI's `Video` object for a video job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = OpenAiVideo)]
pub struct VideoObject {
    /// The job id.
    pub id: String,
    /// Always `video`.
    #[schema(value_type = String)]
    pub object: &'static str,
    /// `queued`, `in_progress`, `completed` or `failed` (a canceled job is `failed`).
    #[schema(value_type = String)]
    pub status: &'static str,
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

impl VideoObject {
    /// The object of `job`.
    #[must_use]
    pub fn new(job: &Job) -> Self {
        let status = match job.state() {
            JobState::Queued => "queued",
            JobState::Running => "in_progress",
            JobState::Succeeded => "completed",
            JobState::Failed | JobState::Canceled => "failed",
        };
        let input = job.input();
        Self {
            id: job.id().to_string(),
            object: "video",
            status,
            progress: job.progress(),
            model: job.model().to_string(),
            created_at: job.created_at().unix_timestamp(),
            completed_at: job.finished_at().map(time::OffsetDateTime::unix_timestamp),
            expires_at: None,
            error: job
                .error()
                .map(|e| VideoError { code: e.code.as_str().to_ascii_lowercase(), message: e.message.clone() }),
            seconds: input.duration_sec.map(|s| s.to_string()).unwrap_or_default(),
            size: pixel_size(&input.aspect_ratio, input.resolution.as_deref()),
            prompt: input.prompt.clone(),
            remixed_from_video_id: None,
        }
    }
}

/// `WxH` for an aspect ratio at a resolution (its shorter side; 720 lines when it has none).
fn pixel_size(aspect_ratio: &str, resolution: Option<&str>) -> String {
    let short = resolution.and_then(|r| r.strip_suffix('p')).and_then(|r| r.parse::<u32>().ok()).unwrap_or(720);
    let (w, h) = aspect_ratio
        .split_once(':')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .filter(|(w, h)| *w > 0 && *h > 0)
        .unwrap_or((1, 1));
    let long = |a: u32, b: u32| (u64::from(short) * u64::from(a)).div_ceil(u64::from(b));
    if w >= h { format!("{}x{short}", long(w, h)) } else { format!("{short}x{}", long(h, w)) }
}

/// One model of [`ModelList`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = OpenAiModel)]
pub struct ModelObject {
    /// The model id.
    pub id: String,
    /// Always `model`.
    #[schema(value_type = String)]
    pub object: &'static str,
    /// Unix seconds; catalog models carry no creation time, so 0.
    pub created: i64,
    /// Who runs it: the provider.
    pub owned_by: String,
}

/// The answer of `GET /openai/v1/models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = OpenAiModelList)]
pub struct ModelList {
    /// Always `list`.
    #[schema(value_type = String)]
    pub object: &'static str,
    /// The catalog's models.
    pub data: Vec<ModelObject>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn catalog() -> Catalog {
        Catalog::builtin().unwrap()
    }

    #[test]
    fn an_image_request_maps_onto_the_native_one() {
        let read = ImagesRequest::from_json(
            &json!({"model": "flux-pro", "prompt": "a fox", "n": 2, "size": "1792x1024", "quality": "hd"}),
        )
        .unwrap();
        let request = read.try_into_domain(&catalog()).unwrap();
        assert_eq!(request.model.to_string(), "flux-pro");
        assert_eq!((request.input.n, request.input.aspect_ratio.as_str()), (Some(2), "16:9"));
    }

    #[test]
    fn image_refusals_name_openai_parameters() {
        for (body, param) in [
            (json!({"prompt": "a", "model": "dall-e-3"}), "model"),
            (json!({"prompt": "a", "n": 9}), "n"),
            (json!({"prompt": "a", "size": "big"}), "size"),
            (json!({"prompt": "a", "response_format": "png"}), "response_format"),
            (json!({"prompt": "a", "surprise": 1}), "surprise"),
            (json!({"prompt": 5}), "prompt"),
            (json!({"model": "flux-pro"}), "prompt"),
        ] {
            let refused = ImagesRequest::from_json(&body).and_then(|r| r.try_into_domain(&catalog())).unwrap_err();
            assert_eq!(refused.param.as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn a_video_request_from_a_form_maps_seconds_and_size() {
        let fields = json!({"model": "seedance-2.0-fast", "prompt": "waves", "seconds": "8", "size": "1280x720"});
        let request = VideoRequest::from_json(&fields).unwrap().try_into_domain(&catalog()).unwrap();
        assert_eq!(request.input.duration_sec, Some(8));
        assert_eq!((request.input.aspect_ratio.as_str(), request.input.resolution.as_deref()), ("16:9", Some("720p")));
        let refused = VideoRequest::from_json(&json!({"prompt": "waves", "seconds": "99"}))
            .unwrap()
            .try_into_domain(&catalog())
            .unwrap_err();
        assert_eq!(refused.param.as_deref(), Some("seconds"));
        let upload = VideoRequest::from_json(&json!({"prompt": "waves", "input_reference": "x"})).unwrap_err();
        assert_eq!(upload.param.as_deref(), Some("input_reference"));
    }

    #[test]
    fn pixel_sizes_follow_ratio_and_resolution() {
        assert_eq!(pixel_size("16:9", Some("720p")), "1280x720");
        assert_eq!(pixel_size("9:16", Some("1080p")), "1080x1920");
        assert_eq!(pixel_size("1:1", None), "720x720");
    }
}
