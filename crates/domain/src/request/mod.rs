//! Generation requests: a [`GenerationDraft`] (what a client sent, already typed by the edge that
//! read it) validated once against the catalog into a [`GenerationRequest`], every default
//! applied. Each refusal names the offending `param`.
//!
//! The draft is not a wire format: the HTTP edge reads JSON into its own request DTOs and builds
//! the draft from them; another tool can build one directly.

use serde_json::{Map, Value};

use crate::capacity::Priority;
use crate::catalog::{Catalog, DurationRange, Model};
use crate::ids::ModelId;
use crate::input::GenerationInput;
use crate::invalid::InvalidRequest;
use crate::modality::Modality;
use crate::routing::{PreferenceDraft, RoutePreference};

mod received;
mod webhook_url;

pub use received::ReceivedRequest;
pub use webhook_url::{MAX_WEBHOOK_URL_CHARS, check_webhook_url};

/// Longest `prompt`, in characters after trimming.
pub const MAX_PROMPT_CHARS: usize = 10_000;
/// Longest `negative_prompt`, in characters.
pub const MAX_NEGATIVE_PROMPT_CHARS: usize = 2_000;
/// Most `image_inputs`.
pub const MAX_IMAGE_INPUTS: usize = 10;
/// Longest URL in `image_inputs`.
pub const MAX_IMAGE_URL_CHARS: usize = 2_048;
/// Most images uploaded with one request (OpenAI's `images.edit`).
pub const MAX_UPLOADED_IMAGES: usize = 16;

/// Largest `extra` object, serialized.
pub const MAX_EXTRA_BYTES: usize = 64 * 1024;
/// Most images per request.
pub const MAX_IMAGES: u8 = 4;

/// Default model of the video endpoint.
pub const DEFAULT_VIDEO_MODEL: &str = "seedance-2.0-fast";
/// Default model of the image endpoint.
pub const DEFAULT_IMAGE_MODEL: &str = "nano-banana";

/// A number as a client sent it: a whole, non-negative number (`5` or `5.0`), the text of an
/// option of a `select` field (a form drawn from the models list sends `"10"`), or anything else,
/// which every integer field refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WholeNumber {
    /// A whole number from 0 up.
    Exact(u64),
    /// Text; taken only where the model's field is a `select` of numbers.
    Text(String),
    /// Negative, fractional, or too large.
    Other,
}

/// What a client asked for, typed but not yet checked: `None` where a field was absent (or null),
/// so that the model's default applies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationDraft {
    /// The prompt, untrimmed.
    pub prompt: Option<String>,
    /// The model id; the endpoint's default when absent.
    pub model: Option<String>,
    /// What to avoid.
    pub negative_prompt: Option<String>,
    /// One of the model's aspect ratios.
    pub aspect_ratio: Option<String>,
    /// One of the model's resolutions, for models that take one.
    pub resolution: Option<String>,
    /// Seconds of video, for video models.
    pub duration_sec: Option<WholeNumber>,
    /// Number of images, for image models.
    pub n: Option<WholeNumber>,
    /// Seed, 0 to 2^32-1.
    pub seed: Option<WholeNumber>,
    /// Reference image URLs.
    pub image_inputs: Option<Vec<String>>,
    /// Provider-specific parameters, passed through unchanged.
    pub extra: Option<Map<String, Value>>,
    /// Where to post the job's end ([`crate::client_webhooks`]).
    pub webhook_url: Option<String>,
}

/// A generation request, validated against the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationRequest {
    /// The model in effect (the endpoint's default when none was sent).
    pub model: ModelId,
    /// The endpoint's modality.
    pub modality: Modality,
    /// The validated inputs.
    pub input: GenerationInput,
    /// Where to post the job's end; checked for its form only, its host at submission.
    pub webhook_url: Option<String>,
    /// How soon it goes to its provider when slots are scarce.
    pub priority: Priority,
    /// Seconds after acceptance by which the job must have started running at its provider, or
    /// it fails `DEADLINE_EXCEEDED`; `None`: no such deadline.
    pub start_within_secs: Option<u32>,
    /// Which of the model's routes it may take, checked against the providers at submission.
    pub routing: RoutePreference,
}

/// The longest `start_within_secs` a request may ask for: a day.
pub const MAX_START_WITHIN_SECS: u32 = 86_400;

fn integer(name: &str, value: Option<WholeNumber>, min: u64, max: u64) -> Result<Option<u64>, InvalidRequest> {
    match value {
        None => Ok(None),
        Some(WholeNumber::Exact(n)) if (min..=max).contains(&n) => Ok(Some(n)),
        Some(_) => Err(InvalidRequest::param(name, format!("`{name}` must be an integer from {min} to {max}"))),
    }
}

fn duration(range: &DurationRange, given: WholeNumber) -> Result<u32, InvalidRequest> {
    let seconds = match given {
        WholeNumber::Exact(n) => Some(n),
        WholeNumber::Text(text) if !range.choices.is_empty() => text.parse().ok(),
        WholeNumber::Text(_) | WholeNumber::Other => None,
    };
    match seconds.filter(|s| range.allows(*s)).and_then(|s| u32::try_from(s).ok()) {
        Some(seconds) => Ok(seconds),
        None if range.choices.is_empty() => Err(InvalidRequest::param(
            "duration_sec",
            format!("`duration_sec` must be an integer from {} to {}", range.min, range.max),
        )),
        None => {
            let choices: Vec<String> = range.choices.iter().map(u32::to_string).collect();
            Err(InvalidRequest::param("duration_sec", format!("`duration_sec` must be one of {}", choices.join(", "))))
        }
    }
}

fn choice(name: &str, value: Option<String>, allowed: &[String]) -> Result<Option<String>, InvalidRequest> {
    match value {
        None => Ok(None),
        Some(v) if allowed.contains(&v) => Ok(Some(v)),
        Some(v) => {
            Err(InvalidRequest::param(name, format!("`{name}` must be one of {}; got {v:?}", allowed.join(", "))))
        }
    }
}

fn not_taken(name: &str, model: &Model) -> InvalidRequest {
    InvalidRequest::param(name, format!("model {} does not take `{name}`", model.id))
}

impl GenerationRequest {
    /// Validates a draft sent to the generation endpoint of `endpoint` (video or image).
    ///
    /// ```
    /// use genjobs_domain::catalog::Catalog;
    /// use genjobs_domain::modality::Modality;
    /// use genjobs_domain::request::{GenerationDraft, GenerationRequest};
    ///
    /// let catalog = Catalog::builtin()?;
    /// let draft = GenerationDraft { prompt: Some("  waves on a rock ".into()), ..GenerationDraft::default() };
    /// let request = GenerationRequest::validate(Modality::Video, draft, &catalog)?;
    /// assert_eq!(request.model.as_str(), "seedance-2.0-fast");
    /// assert_eq!(request.input.prompt, "waves on a rock");
    /// assert_eq!(request.input.duration_sec, Some(5));
    ///
    /// let refused = GenerationRequest::validate(Modality::Video, GenerationDraft::default(), &catalog);
    /// assert_eq!(refused.unwrap_err().param.as_deref(), Some("prompt"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`InvalidRequest`] naming the first field at fault: a missing or over-long prompt, an
    /// unknown model or one of another modality, a value outside its range or not among its
    /// choices, a field the model does not take.
    pub fn validate(endpoint: Modality, draft: GenerationDraft, catalog: &Catalog) -> Result<Self, InvalidRequest> {
        let prompt = match draft.prompt.as_deref().map(str::trim) {
            None | Some("") => return Err(InvalidRequest::param("prompt", "`prompt` is required")),
            Some(p) if p.chars().count() > MAX_PROMPT_CHARS => {
                return Err(InvalidRequest::param(
                    "prompt",
                    format!("`prompt` must be at most {MAX_PROMPT_CHARS} characters"),
                ));
            }
            Some(p) => p.to_owned(),
        };
        let model = resolve_model(draft.model.as_deref(), endpoint, catalog)?;

        let negative_prompt = match draft.negative_prompt {
            Some(p) if p.chars().count() > MAX_NEGATIVE_PROMPT_CHARS => {
                return Err(InvalidRequest::param(
                    "negative_prompt",
                    format!("`negative_prompt` must be at most {MAX_NEGATIVE_PROMPT_CHARS} characters"),
                ));
            }
            Some(p) if !p.trim().is_empty() => Some(p),
            _ => None,
        };
        let aspect_ratio = match (model.aspect_ratios.is_empty(), draft.aspect_ratio) {
            (true, Some(_)) => return Err(not_taken("aspect_ratio", model)),
            (_, given) => choice("aspect_ratio", given, &model.aspect_ratios)?
                .unwrap_or_else(|| model.default_aspect_ratio.clone()),
        };

        let resolution = match (model.resolutions.is_empty(), draft.resolution) {
            (true, Some(_)) => return Err(not_taken("resolution", model)),
            (true, None) => None,
            (false, given) => choice("resolution", given, &model.resolutions)?.or(model.default_resolution.clone()),
        };
        let duration_sec = match (&model.duration_sec, draft.duration_sec) {
            (Some(range), None) => Some(range.default),
            (Some(range), Some(given)) => Some(duration(range, given)?),
            (None, Some(_)) => return Err(not_taken("duration_sec", model)),
            (None, None) => None,
        };
        let n = match (endpoint, draft.n) {
            (Modality::Image, given) => Some(integer("n", given, 1, u64::from(MAX_IMAGES))?.map_or(1, |n| n as u8)),
            (_, Some(_)) => return Err(not_taken("n", model)),
            (_, None) => None,
        };
        let seed = integer("seed", draft.seed, 0, u64::from(u32::MAX))?.map(|s| s as u32);
        let image_inputs = image_inputs(draft.image_inputs.unwrap_or_default())?;
        let extra = match draft.extra {
            Some(extra) if serde_json::to_vec(&extra).map_or(usize::MAX, |b| b.len()) > MAX_EXTRA_BYTES => {
                return Err(InvalidRequest::param("extra", "`extra` must be at most 64 KiB"));
            }
            extra => extra,
        };
        if let Some(url) = &draft.webhook_url {
            check_webhook_url(url)?;
        }

        Ok(GenerationRequest {
            model: model.id.clone(),
            modality: endpoint,
            input: GenerationInput {
                prompt,
                negative_prompt,
                aspect_ratio,
                resolution,
                duration_sec,
                n,
                seed,
                image_inputs,
                extra,
            },
            webhook_url: draft.webhook_url,
            priority: Priority::Normal,
            start_within_secs: None,
            routing: RoutePreference::default(),
        })
    }

    /// The request sent as `priority` (`normal` or `low`; `normal` when absent).
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `priority` for any other value.
    pub fn with_priority(self, priority: Option<&str>) -> Result<Self, InvalidRequest> {
        let priority = match priority {
            None => Priority::Normal,
            Some(text) => Priority::parse(text)
                .ok_or_else(|| InvalidRequest::param("priority", "`priority` must be `normal` or `low`"))?,
        };
        Ok(Self { priority, ..self })
    }

    /// The request that must start running within `secs` seconds of its acceptance (none when
    /// absent).
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `start_within_secs` outside 1 to [`MAX_START_WITHIN_SECS`].
    pub fn with_start_within(self, secs: Option<u32>) -> Result<Self, InvalidRequest> {
        if secs.is_some_and(|secs| !(1..=MAX_START_WITHIN_SECS).contains(&secs)) {
            return Err(InvalidRequest::param(
                "start_within_secs",
                format!("`start_within_secs` must be an integer from 1 to {MAX_START_WITHIN_SECS}"),
            ));
        }
        Ok(Self { start_within_secs: secs, ..self })
    }
}

impl GenerationRequest {
    /// The request routed as `provider` prefers (the catalog's routes, in order, when absent).
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `provider` for an empty `only`, `provider.sort` for an unknown
    /// sort.
    pub fn with_routing(self, provider: Option<PreferenceDraft>) -> Result<Self, InvalidRequest> {
        let routing = provider.map(RoutePreference::from_draft).transpose()?.unwrap_or_default();
        Ok(Self { routing, ..self })
    }

    /// The request with `links`, the links of the images uploaded with it, as its image inputs
    /// in place of any URLs. The images are kept as uploads are (`crate::usecases::Uploads`):
    /// a job names them by link and never holds their bytes. The edge bounds their bytes
    /// ([`crate::upload::MAX_UPLOAD_BYTES`] in all) as they arrive.
    ///
    /// # Errors
    /// [`InvalidRequest`] naming `image` for no image, more than [`MAX_UPLOADED_IMAGES`], or a
    /// link that is not an http or https URL.
    pub fn with_uploaded_images(self, links: Vec<String>) -> Result<Self, InvalidRequest> {
        if links.is_empty() || links.len() > MAX_UPLOADED_IMAGES {
            return Err(InvalidRequest::param("image", format!("give 1 to {MAX_UPLOADED_IMAGES} images")));
        }
        if !links.iter().all(|link| is_web_url(link)) {
            return Err(InvalidRequest::param("image", "each image must be given by an http or https link"));
        }
        Ok(Self { input: GenerationInput { image_inputs: links, ..self.input }, ..self })
    }
}

/// The model a request for `endpoint` names, or the endpoint's default when it names none.
///
/// # Errors
/// [`InvalidRequest`] naming `model` when the catalog has no such model or it makes another
/// modality.
pub fn resolve_model<'c>(
    id: Option<&str>,
    endpoint: Modality,
    catalog: &'c Catalog,
) -> Result<&'c Model, InvalidRequest> {
    let default = if endpoint == Modality::Video { DEFAULT_VIDEO_MODEL } else { DEFAULT_IMAGE_MODEL };
    let id = id.unwrap_or(default);
    let model = catalog.model(id).ok_or_else(|| InvalidRequest::param("model", format!("unknown model {id:?}")))?;
    if model.modality != endpoint {
        return Err(InvalidRequest::param(
            "model",
            format!("model {id:?} is {} model, not {} model", model.modality.with_article(), endpoint.with_article()),
        ));
    }
    Ok(model)
}

fn image_inputs(urls: Vec<String>) -> Result<Vec<String>, InvalidRequest> {
    let param = "image_inputs";
    if urls.len() > MAX_IMAGE_INPUTS {
        return Err(InvalidRequest::param(param, format!("`image_inputs` takes at most {MAX_IMAGE_INPUTS} URLs")));
    }
    if urls.iter().all(|url| is_web_url(url)) {
        return Ok(urls);
    }
    Err(InvalidRequest::param(
        param,
        format!("each of `image_inputs` must be an http or https URL of at most {MAX_IMAGE_URL_CHARS} characters"),
    ))
}

fn is_web_url(url: &str) -> bool {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    url.len() <= MAX_IMAGE_URL_CHARS
        && rest.is_some_and(|r| {
            let host = r.split(['/', '?', '#']).next().unwrap_or("");
            !host.is_empty() && !r.chars().any(char::is_whitespace)
        })
}

#[cfg(test)]
mod tests;
