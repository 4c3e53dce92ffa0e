//! OpenAI's requests onto the native ones, and jobs as OpenAI's `Video` object. The wire types
//! are `genjobs_api::openai`'s; a request is read with serde (a parameter OpenAI's API does not
//! have, or a value of the wrong type, is refused naming it), then mapped onto the native request
//! bodies, whose validation is the same as `/api/v1`'s.

use genjobs_api::openai::{ImagesRequest, VideoError, VideoObject, VideoRequest};
use genjobs_api::{ImageRequest, VideoRequest as NativeVideoRequest};
use genjobs_domain::catalog::Catalog;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::job::{Job, JobErrorCode, JobState};
use genjobs_domain::modality::Modality;
use genjobs_domain::request::{GenerationRequest, resolve_model};
use serde_json::{Map, Value};

use super::sizes::Size;
use crate::dto::requests::{image_request, read, video_request};

fn size(size: Option<&str>) -> Result<Option<Size>, InvalidRequest> {
    size.map(Size::parse).transpose()
}

/// The native validation names the native fields; a client of this edge sent OpenAI's. The
/// message names `seconds` too, whose values are the duration's; a `size` is `WxH`, not the
/// aspect ratio or resolution the message lists, so its message stays the native one.
fn in_openai_terms(mut refused: InvalidRequest) -> InvalidRequest {
    match refused.param.as_deref() {
        Some("duration_sec") => {
            refused.param = Some("seconds".to_owned());
            refused.message = refused.message.replace("`duration_sec`", "`seconds`");
        }
        Some("aspect_ratio" | "resolution") => refused.param = Some("size".to_owned()),
        _ => {}
    }
    refused
}

/// The native request of an image request: `size` becomes the model's nearest aspect ratio.
///
/// # Errors
/// [`InvalidRequest`] from the native validation, in OpenAI's parameter names.
pub fn images_into_domain(asked: ImagesRequest, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
    let size = size(asked.size.as_deref())?;
    let model = resolve_model(asked.model.as_deref(), Modality::Image, catalog)?;
    let body = ImageRequest {
        prompt: asked.prompt.unwrap_or_default(),
        model: Some(model.id.to_string()),
        aspect_ratio: size.and_then(|size| size.nearest_aspect_ratio(&model.aspect_ratios)),
        n: asked.n,
        provider: asked.provider,
        ..ImageRequest::default()
    };
    image_request(body, catalog).map_err(in_openai_terms)
}

/// The native request of an image edit but its images: as [`images_into_domain`], for a model
/// that takes image inputs. Checked before the images are kept, so that a refused edit keeps
/// nothing and costs nothing of the day's upload quota; the links of the images kept are added
/// after ([`GenerationRequest::with_uploaded_images`]).
///
/// # Errors
/// [`InvalidRequest`] naming `model` for a model that takes no image inputs; from the native
/// validation, in OpenAI's parameter names.
pub fn edit_into_domain(asked: ImagesRequest, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
    let model = resolve_model(asked.model.as_deref(), Modality::Image, catalog)?;
    if !model.takes_image_inputs() {
        return Err(InvalidRequest::param("model", format!("model {:?} takes no image inputs", model.id.as_str())));
    }
    images_into_domain(asked, catalog)
}

/// Reads the fields of a video request's JSON body or form.
///
/// # Errors
/// As [`read`]; a reference image upload (`input_reference`) is refused: the native API takes
/// reference images as URLs only.
pub fn read_video_request(fields: Map<String, Value>) -> Result<VideoRequest, InvalidRequest> {
    if fields.contains_key("input_reference") {
        return Err(InvalidRequest::param(
            "input_reference",
            "`input_reference` is not supported here; pass image URLs to /api/v1/video/generations",
        ));
    }
    read(&Value::Object(fields))
}

/// The native request of a video request: `seconds` is the duration; `size` becomes the model's
/// nearest aspect ratio and, for a model with resolutions, the one nearest its shorter side.
///
/// # Errors
/// [`InvalidRequest`] from the native validation, in OpenAI's parameter names.
pub fn video_into_domain(asked: VideoRequest, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
    let size = size(asked.size.as_deref())?;
    let model = resolve_model(asked.model.as_deref(), Modality::Video, catalog)?;
    let body = NativeVideoRequest {
        prompt: asked.prompt.unwrap_or_default(),
        model: Some(model.id.to_string()),
        duration_sec: asked.seconds,
        aspect_ratio: size.and_then(|size| size.nearest_aspect_ratio(&model.aspect_ratios)),
        resolution: size.and_then(|size| size.nearest_resolution(&model.resolutions)),
        provider: asked.provider,
        ..NativeVideoRequest::default()
    };
    video_request(body, catalog).map_err(in_openai_terms)
}

/// OpenAI's `Video` object of `job`.
#[must_use]
pub fn video_object(job: &Job) -> VideoObject {
    let status = match job.state() {
        JobState::Queued => "queued",
        JobState::Running => "in_progress",
        JobState::Succeeded => "completed",
        JobState::Failed | JobState::Canceled => "failed",
    };
    let input = job.input();
    VideoObject {
        id: job.id().to_string(),
        object: "video".to_owned(),
        status: status.to_owned(),
        progress: job.progress(),
        model: job.model().to_string(),
        created_at: job.created_at().unix_timestamp(),
        completed_at: job.finished_at().map(time::OffsetDateTime::unix_timestamp),
        expires_at: None,
        error: job.error().map(|e| VideoError { code: video_error_code(e.code), message: e.message.clone() }),
        seconds: input.duration_sec.map(|s| s.to_string()).unwrap_or_default(),
        size: pixel_size(&input.aspect_ratio, input.resolution.as_deref()),
        prompt: input.prompt.clone(),
        remixed_from_video_id: None,
    }
}

/// OpenAI's `Video.error.code`: the native code in lower case, and `canceled` for a canceled
/// job, which OpenAI's clients see as a failed video.
pub(super) fn video_error_code(code: JobErrorCode) -> String {
    match code {
        JobErrorCode::JobCanceled => "canceled".to_owned(),
        other => other.as_str().to_ascii_lowercase(),
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn catalog() -> Catalog {
        Catalog::builtin().unwrap()
    }

    fn images(body: Value) -> Result<GenerationRequest, InvalidRequest> {
        read::<ImagesRequest>(&body).and_then(|asked| images_into_domain(asked, &catalog()))
    }

    fn video(body: Value) -> Result<GenerationRequest, InvalidRequest> {
        let Value::Object(fields) = body else { panic!("an object") };
        read_video_request(fields).and_then(|asked| video_into_domain(asked, &catalog()))
    }

    #[test]
    fn an_image_request_maps_onto_the_native_one() {
        let request =
            images(json!({"model": "flux-pro", "prompt": "a fox", "n": 2, "size": "1792x1024", "quality": "hd"}))
                .unwrap();
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
            let refused = images(body.clone()).unwrap_err();
            assert_eq!(refused.param.as_deref(), Some(param), "{body}");
        }
    }

    #[test]
    fn a_video_request_from_a_form_maps_seconds_and_size() {
        let request =
            video(json!({"model": "seedance-2.0-fast", "prompt": "waves", "seconds": "8", "size": "1280x720"}))
                .unwrap();
        assert_eq!(request.input.duration_sec, Some(8));
        assert_eq!((request.input.aspect_ratio.as_str(), request.input.resolution.as_deref()), ("16:9", Some("720p")));
        let refused = video(json!({"prompt": "waves", "seconds": "99"})).unwrap_err();
        assert_eq!(refused.param.as_deref(), Some("seconds"));
        assert!(refused.message.starts_with("`seconds` must be "), "{}", refused.message);
        assert!(!refused.message.contains("duration_sec"), "{}", refused.message);
        let upload = video(json!({"prompt": "waves", "input_reference": "x"})).unwrap_err();
        assert_eq!(upload.param.as_deref(), Some("input_reference"));
    }

    #[test]
    fn pixel_sizes_follow_ratio_and_resolution() {
        assert_eq!(pixel_size("16:9", Some("720p")), "1280x720");
        assert_eq!(pixel_size("9:16", Some("1080p")), "1080x1920");
        assert_eq!(pixel_size("1:1", None), "720x720");
    }
}
