//! A model as the use cases read it: its document, checked, with what requests are validated
//! against (aspect ratios, resolutions, durations) read from its form fields.

use serde_json::Value;

use super::document::{DocumentFault, Field, FieldKind, ModelDocument, Route};
use super::price::{Price, Rate, Unit};
use crate::credits::Credits;
use crate::ids::ModelId;
use crate::input::GenerationInput;
use crate::modality::Modality;

/// Longest model id.
pub const MAX_MODEL_ID_CHARS: usize = 100;

/// Typical run time of a video model whose document gives none.
const VIDEO_RUN_SECS: u32 = 60;
/// Typical run time of an image model whose document gives none.
const IMAGE_RUN_SECS: u32 = 10;

/// Allowed and default video duration of a model, in whole seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationRange {
    /// Shortest duration.
    pub min: u32,
    /// Longest duration.
    pub max: u32,
    /// Duration when the client sends none.
    pub default: u32,
    /// When not empty, the only durations the model takes (within `min..=max`): its form field
    /// is a `select` of them.
    pub choices: Vec<u32>,
}

impl DurationRange {
    /// Whether `seconds` is a duration the model takes.
    #[must_use]
    pub fn allows(&self, seconds: u64) -> bool {
        (u64::from(self.min)..=u64::from(self.max)).contains(&seconds)
            && (self.choices.is_empty() || self.choices.iter().any(|c| u64::from(*c) == seconds))
    }
}

/// One model of the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The id clients pass as `model`.
    pub id: ModelId,
    /// What it produces.
    pub modality: Modality,
    /// Human-readable name.
    pub display_name: String,
    /// What a client should know when choosing it.
    pub description: Option<String>,
    /// Form fields, in display order.
    pub fields: Vec<Field>,
    /// What it costs.
    pub price: Price,
    /// Where it runs, in order of preference.
    pub routes: Vec<Route>,
    /// Whether clients may use it.
    pub enabled: bool,
    /// How long a run usually takes, to estimate progress when the provider reports none.
    pub typical_run_secs: u32,
    /// Whether its jobs are checked by the moderation service before they are sent.
    pub moderate: bool,
    /// Aspect ratios the model accepts (its `aspectRatio` field's options).
    pub aspect_ratios: Vec<String>,
    /// Aspect ratio when the client sends none.
    pub default_aspect_ratio: String,
    /// Resolutions the model accepts; empty when it takes no `resolution`.
    pub resolutions: Vec<String>,
    /// Resolution when the client sends none.
    pub default_resolution: Option<String>,
    /// Duration limits of a video model.
    pub duration_sec: Option<DurationRange>,
    /// Whether its jobs spill over to a provider with a free slot rather than wait behind a cap.
    pub spill: bool,
    document: ModelDocument,
}

/// The options of a `select` field, and its default (the first option when it names none).
fn select(index: usize, field: &Field) -> Result<(Vec<String>, String), DocumentFault> {
    let at = |what: &str| format!("fields[{index}].{what}");
    if field.kind != FieldKind::Select {
        return Err(DocumentFault::at(at("kind"), format!("`{}` must be a select field", field.name)));
    }
    let options: Vec<String> = field.options.iter().flatten().map(|o| o.value.clone()).collect();
    let Some(first) = options.first().cloned() else {
        return Err(DocumentFault::at(at("options"), "a select field needs at least one option"));
    };
    let default = match &field.default {
        None => first,
        Some(Value::String(d)) if options.contains(d) => d.clone(),
        Some(Value::Number(n)) if options.contains(&n.to_string()) => n.to_string(),
        Some(_) => return Err(DocumentFault::at(at("default"), "the default must be one of the options")),
    };
    Ok((options, default))
}

fn whole(value: Option<&Value>, path: String) -> Result<Option<u32>, DocumentFault> {
    let number = match value {
        None => return Ok(None),
        Some(Value::String(text)) => text.parse().ok(),
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(_) => None,
    };
    number.map(Some).ok_or_else(|| DocumentFault::at(path, "must be a whole number of seconds"))
}

fn duration(index: usize, field: &Field) -> Result<DurationRange, DocumentFault> {
    let at = |what: &str| format!("fields[{index}].{what}");
    match field.kind {
        FieldKind::Select => {
            let (options, default) = select(index, field)?;
            let mut choices = Vec::with_capacity(options.len());
            for (i, option) in options.iter().enumerate() {
                let seconds = whole(Some(&Value::String(option.clone())), at(&format!("options[{i}].value")))?;
                choices.extend(seconds);
            }
            let default = whole(Some(&Value::String(default)), at("default"))?.unwrap_or_default();
            let (min, max) = (choices.iter().min().copied(), choices.iter().max().copied());
            Ok(DurationRange { min: min.unwrap_or(0), max: max.unwrap_or(0), default, choices })
        }
        FieldKind::Number => {
            let min = whole(field.min.clone().map(Value::Number).as_ref(), at("min"))?
                .ok_or_else(|| DocumentFault::at(at("min"), "a durationSec number field needs `min`"))?;
            let max = whole(field.max.clone().map(Value::Number).as_ref(), at("max"))?
                .ok_or_else(|| DocumentFault::at(at("max"), "a durationSec number field needs `max`"))?;
            let default = whole(field.default.as_ref(), at("default"))?.unwrap_or(min);
            if min > max {
                return Err(DocumentFault::at(at("min"), "`min` must not exceed `max`"));
            }
            if !(min..=max).contains(&default) {
                return Err(DocumentFault::at(at("default"), "the default must lie within min..=max"));
            }
            Ok(DurationRange { min, max, default, choices: Vec::new() })
        }
        _ => Err(DocumentFault::at(at("kind"), "`durationSec` must be a number or a select field")),
    }
}

impl Model {
    /// Checks a document and reads what requests are validated against from its fields.
    ///
    /// # Errors
    /// [`DocumentFault`] at the path of the first fault: an id that is empty, too long or not
    /// URL-safe; a duplicate field; a select field without options or with a default outside
    /// them; a video model without a `durationSec` field; a price whose unit does not fit the
    /// modality, or that names resolutions the model does not take; no route, or a route
    /// without its provider.
    pub fn from_document(id: &str, document: ModelDocument) -> Result<Model, DocumentFault> {
        let id_is_fine = !id.is_empty()
            && id.chars().count() <= MAX_MODEL_ID_CHARS
            && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !id_is_fine {
            return Err(DocumentFault::at(
                "id",
                format!("a model id is 1 to {MAX_MODEL_ID_CHARS} of the characters a-z, A-Z, 0-9, `-`, `_`, `.`"),
            ));
        }
        if let Some(named) = document.id.as_deref().filter(|named| *named != id) {
            return Err(DocumentFault::at("id", format!("the document names {named:?}, not {id:?}")));
        }
        let mut aspect = (Vec::new(), "1:1".to_owned());
        let mut resolution = (Vec::new(), None);
        let mut duration_sec = None;
        for (index, field) in document.fields.iter().enumerate() {
            if document.fields[..index].iter().any(|f| f.name == field.name) {
                return Err(DocumentFault::at(format!("fields[{index}].name"), "duplicate field name"));
            }
            if field.kind == FieldKind::Select && field.name != "durationSec" {
                select(index, field)?;
            }
            match field.name.as_str() {
                "aspectRatio" => aspect = select(index, field)?,
                "resolution" => {
                    let (options, default) = select(index, field)?;
                    resolution = (options, Some(default));
                }
                "durationSec" => duration_sec = Some(duration(index, field)?),
                _ => {}
            }
        }
        match (document.modality, document.price.per, &duration_sec) {
            (Modality::Image, Unit::Image, None) | (Modality::Video, Unit::Second, Some(_)) => {}
            (Modality::Video, _, None) => {
                return Err(DocumentFault::at("fields", "a video model needs a `durationSec` field"));
            }
            (Modality::Image, _, Some(_)) => {
                return Err(DocumentFault::at("fields", "an image model takes no `durationSec` field"));
            }
            (Modality::Image | Modality::Video, _, _) => {
                return Err(DocumentFault::at(
                    "price.per",
                    format!("{} model is priced per {}", document.modality.with_article(), per(document.modality)),
                ));
            }
            _ => return Err(DocumentFault::at("modality", "only image and video models can be served")),
        }
        if let Some(unknown) = document.price.by_resolution.keys().find(|r| !resolution.0.contains(*r)) {
            return Err(DocumentFault::at(
                format!("price.by_resolution.{unknown}"),
                format!("the model takes no resolution {unknown:?}"),
            ));
        }
        if document.routes.is_empty() {
            return Err(DocumentFault::at("routes", "a model needs at least one route"));
        }
        if let Some(index) = document.routes.iter().position(|r| r.provider.trim().is_empty()) {
            return Err(DocumentFault::at(format!("routes[{index}].provider"), "a route names its provider"));
        }
        let typical_run_secs = document.typical_run_secs.unwrap_or(match document.modality {
            Modality::Video => VIDEO_RUN_SECS,
            _ => IMAGE_RUN_SECS,
        });
        Ok(Model {
            id: ModelId::new(id),
            modality: document.modality,
            display_name: document.display_name.clone(),
            description: document.description.clone(),
            fields: document.fields.clone(),
            price: document.price.clone(),
            routes: document.routes.clone(),
            enabled: document.enabled,
            typical_run_secs,
            moderate: document.moderate,
            aspect_ratios: aspect.0,
            default_aspect_ratio: aspect.1,
            resolutions: resolution.0,
            default_resolution: resolution.1,
            duration_sec,
            spill: document.spill,
            document: ModelDocument { id: None, ..document },
        })
    }

    /// The document the model was read from, with its id.
    #[must_use]
    pub fn document(&self) -> ModelDocument {
        ModelDocument { id: Some(self.id.to_string()), ..self.document.clone() }
    }

    /// Whether the model takes image inputs: its form has an image field.
    #[must_use]
    pub fn takes_image_inputs(&self) -> bool {
        self.fields.iter().any(|field| field.kind == FieldKind::ImageUrl)
    }

    /// The routes of one provider, with their index among all the model's routes.
    pub fn routes_of<'m>(&'m self, provider: &'m str) -> impl Iterator<Item = (usize, &'m Route)> + 'm {
        self.routes.iter().enumerate().filter(move |(_, r)| r.provider == provider)
    }

    /// The same model, run by `routes` (a job's own choice among the model's, in its order).
    #[must_use]
    pub fn with_routes(&self, routes: Vec<Route>) -> Model {
        Model { routes, ..self.clone() }
    }

    /// The rate a request pays, which its job keeps.
    #[must_use]
    pub fn rate(&self, input: &GenerationInput) -> Rate {
        self.price.rate(input)
    }

    /// The most a request can cost: what is held at acceptance.
    #[must_use]
    pub fn price_to_hold(&self, input: &GenerationInput) -> Credits {
        self.rate(input).to_hold(input)
    }
}

fn per(modality: Modality) -> &'static str {
    if modality == Modality::Video { "second" } else { "image" }
}
