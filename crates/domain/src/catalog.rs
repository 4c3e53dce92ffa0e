//! The model catalog: data, not code. The built-in catalog is `models.json` beside this crate's
//! manifest; an operator replaces it with `GENJOBS_MODELS`. A model says what a client may send
//! (its form fields and limits), its defaults and what it costs. How a model runs at a provider
//! (endpoints, parameter names) is the provider adapter's business, not the catalog's.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use crate::credits::Credits;
use crate::ids::ModelId;
use crate::input::GenerationInput;
use crate::modality::Modality;
use crate::output::OutputItem;

/// One form field of a model, as the models endpoint shows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// camelCase name of the body key (`aspectRatio` for `aspect_ratio`).
    pub name: String,
    /// Label key for display.
    pub label: String,
    /// One of `text`, `textarea`, `number`, `select`, `image-url`.
    pub kind: FieldKind,
    /// Whether the client must fill it.
    #[serde(default)]
    pub required: Option<bool>,
    /// Hint text for an empty field.
    #[serde(default)]
    pub placeholder: Option<String>,
    /// The value used when the client sends none.
    #[serde(default)]
    pub default: Option<Value>,
    /// Choices of a `select` field.
    #[serde(default)]
    pub options: Option<Vec<FieldOption>>,
    /// Lower bound of a `number` field (kept as written: `4`, not `4.0`).
    #[serde(default)]
    pub min: Option<serde_json::Number>,
    /// Upper bound of a `number` field.
    #[serde(default)]
    pub max: Option<serde_json::Number>,
}

/// How a client draws a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FieldKind {
    /// One line of text.
    Text,
    /// Several lines of text.
    Textarea,
    /// A number within `min` and `max`.
    Number,
    /// One of `options`.
    Select,
    /// A URL of an image.
    ImageUrl,
}

/// A choice of a `select` field.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldOption {
    /// The value sent in the body.
    pub value: String,
    /// Label key for display.
    pub label: String,
}

/// Allowed and default video duration of a model, in whole seconds.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurationRange {
    /// Shortest duration.
    pub min: u32,
    /// Longest duration.
    pub max: u32,
    /// Duration when the client sends none.
    pub default: u32,
    /// When not empty, the only durations the model takes (within `min..=max`); its form field
    /// is then a `select` of them.
    #[serde(default)]
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

/// What a model costs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Price {
    /// Credits per image delivered.
    PerImage(u64),
    /// Credits per second of video, by resolution (`default` for models without resolutions).
    PerSecond(BTreeMap<String, u64>),
}

/// One model of the catalog.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// The id clients pass as `model`.
    pub id: ModelId,
    /// What it produces.
    pub modality: Modality,
    /// Human-readable name.
    pub display_name: String,
    /// What a client should know when choosing it (e.g. which tier serves which resolution).
    #[serde(default)]
    pub description: Option<String>,
    /// Form fields, in display order.
    pub fields: Vec<Field>,
    /// What it costs.
    pub price: Price,
    /// How long a run usually takes, to estimate progress when the provider reports none.
    pub typical_run_secs: u32,
    /// Aspect ratios the model accepts.
    pub aspect_ratios: Vec<String>,
    /// Aspect ratio when the client sends none.
    pub default_aspect_ratio: String,
    /// Resolutions the model accepts; empty when it takes no `resolution`.
    #[serde(default)]
    pub resolutions: Vec<String>,
    /// Resolution when the client sends none.
    #[serde(default)]
    pub default_resolution: Option<String>,
    /// Duration limits of a video model.
    #[serde(default)]
    pub duration_sec: Option<DurationRange>,
}

impl Model {
    /// The most a request can cost: what is held at acceptance.
    #[must_use]
    pub fn price_to_hold(&self, input: &GenerationInput) -> Credits {
        match &self.price {
            Price::PerImage(each) => Credits::new(each * u64::from(input.n.unwrap_or(1))),
            Price::PerSecond(_) => Credits::new(self.per_second(input) * u64::from(input.duration_sec.unwrap_or(0))),
        }
    }

    /// What the delivered outputs cost: images delivered, or seconds of video delivered (the
    /// duration requested when the provider does not say), never more than what was held.
    #[must_use]
    pub fn price_delivered(&self, input: &GenerationInput, outputs: &[OutputItem]) -> Credits {
        let held = self.price_to_hold(input);
        let delivered = match &self.price {
            Price::PerImage(each) => Credits::new(each * outputs.len() as u64),
            Price::PerSecond(_) => {
                let requested = input.duration_sec.unwrap_or(0);
                let seconds = outputs
                    .iter()
                    .filter_map(|o| o.meta.duration_sec)
                    .map(|d| d.ceil().clamp(0.0, f64::from(requested)) as u64)
                    .max()
                    .unwrap_or(u64::from(requested));
                Credits::new(self.per_second(input) * seconds)
            }
        };
        delivered.min(held)
    }

    fn per_second(&self, input: &GenerationInput) -> u64 {
        let Price::PerSecond(by_resolution) = &self.price else {
            return 0;
        };
        input
            .resolution
            .as_deref()
            .and_then(|r| by_resolution.get(r))
            .or_else(|| by_resolution.get("default"))
            .copied()
            .unwrap_or(0)
    }
}

/// A catalog file that cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// Not JSON of the catalog's shape.
    #[error("catalog is not valid: {0}")]
    Malformed(#[from] serde_json::Error),
    /// Well-formed, but inconsistent.
    #[error("catalog model {model}: {problem}")]
    Inconsistent {
        /// The model at fault.
        model: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// The models that can be requested.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Every model, in listing order.
    pub models: Vec<Model>,
}

const BUILTIN: &str = include_str!("../models.json");

impl Catalog {
    /// The catalog shipped with genjobs.
    ///
    /// ```
    /// use genjobs_domain::catalog::Catalog;
    /// use genjobs_domain::modality::Modality;
    ///
    /// let catalog = Catalog::builtin()?;
    /// let video = catalog.model("seedance-2.0-fast").expect("a spec model");
    /// assert_eq!(video.modality, Modality::Video);
    /// assert!(catalog.models_of(Some(Modality::Image)).count() >= 3);
    /// # Ok::<(), genjobs_domain::catalog::CatalogError>(())
    /// ```
    ///
    /// # Errors
    /// Only if the shipped file is broken, which a unit test rules out.
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::from_json(BUILTIN)
    }

    /// Parses and checks a catalog file.
    ///
    /// # Errors
    /// [`CatalogError::Malformed`] for JSON of another shape, [`CatalogError::Inconsistent`] for a
    /// duplicate id, a default outside its choices, a price missing for a resolution, or a model
    /// of a modality the generation endpoints cannot serve.
    pub fn from_json(text: &str) -> Result<Catalog, CatalogError> {
        let catalog: Catalog = serde_json::from_str(text)?;
        let mut seen = HashSet::new();
        for model in &catalog.models {
            let fail =
                |problem: &str| CatalogError::Inconsistent { model: model.id.to_string(), problem: problem.to_owned() };
            if !seen.insert(model.id.clone()) {
                return Err(fail("duplicate id"));
            }
            if !model.aspect_ratios.contains(&model.default_aspect_ratio) {
                return Err(fail("default_aspect_ratio is not one of aspect_ratios"));
            }
            match (&model.default_resolution, model.resolutions.is_empty()) {
                (Some(r), false) if model.resolutions.contains(r) => {}
                (None, true) => {}
                _ => {
                    return Err(fail("default_resolution must be one of resolutions, or both absent"));
                }
            }
            match (model.modality, &model.price, &model.duration_sec) {
                (Modality::Image, Price::PerImage(_), None) => {}
                (Modality::Video, Price::PerSecond(prices), Some(range)) => {
                    if range.min > range.max || !range.allows(u64::from(range.default)) {
                        return Err(fail("duration_sec default must be one of its choices, within min..=max"));
                    }
                    if range.choices.iter().any(|c| !(range.min..=range.max).contains(c)) {
                        return Err(fail("duration_sec choices must lie within min..=max"));
                    }
                    let priced = |r: &str| prices.contains_key(r) || prices.contains_key("default");
                    if model.resolutions.is_empty() && !prices.contains_key("default")
                        || !model.resolutions.iter().all(|r| priced(r))
                    {
                        return Err(fail("per_second price missing for a resolution"));
                    }
                }
                _ => {
                    return Err(fail(
                        "image models need per_image prices; video models per_second prices and duration_sec",
                    ));
                }
            }
        }
        Ok(catalog)
    }

    /// The model with this id.
    #[must_use]
    pub fn model(&self, id: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.id.as_str() == id)
    }

    /// The models of one modality, or all of them.
    pub fn models_of(&self, modality: Option<Modality>) -> impl Iterator<Item = &Model> {
        self.models.iter().filter(move |m| modality.is_none_or(|wanted| m.modality == wanted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{OutputKind, OutputMeta};

    fn input() -> GenerationInput {
        GenerationInput {
            prompt: "a cat".into(),
            negative_prompt: None,
            aspect_ratio: "16:9".into(),
            resolution: Some("720p".into()),
            duration_sec: Some(5),
            n: None,
            seed: Some(7),
            image_inputs: vec![],
            extra: None,
        }
    }

    #[test]
    fn builtin_catalog_holds_the_spec_models() {
        let catalog = Catalog::builtin().unwrap();
        for (id, modality) in [
            ("seedance-2.0-fast", Modality::Video),
            ("nano-banana", Modality::Image),
            ("flux-pro", Modality::Image),
            ("ideogram-v3", Modality::Image),
        ] {
            assert_eq!(catalog.model(id).unwrap().modality, modality, "{id}");
        }
        assert!(catalog.models_of(Some(Modality::Video)).count() >= 2);
    }

    #[test]
    fn builtin_field_names_are_camel_case() {
        let catalog = Catalog::builtin().unwrap();
        for field in catalog.models.iter().flat_map(|m| &m.fields) {
            assert!(!field.name.contains('_'), "{}", field.name);
        }
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let mut file: Value = serde_json::from_str(BUILTIN).unwrap();
        let models = file["models"].as_array_mut().unwrap();
        models.push(models[0].clone());
        let text = file.to_string();
        assert!(matches!(Catalog::from_json(&text), Err(CatalogError::Inconsistent { .. })));
    }

    #[test]
    fn video_price_is_per_second_at_the_resolution() {
        let catalog = Catalog::builtin().unwrap();
        let model = catalog.model("seedance-2.0-fast").unwrap();
        let Price::PerSecond(prices) = &model.price else { panic!("video model priced per image") };
        assert_eq!(model.price_to_hold(&input()).get(), prices["720p"] * 5);
    }

    #[test]
    fn delivered_video_shorter_than_requested_costs_less_but_never_more() {
        let catalog = Catalog::builtin().unwrap();
        let model = catalog.model("seedance-2.0-fast").unwrap();
        let video = |secs: f64| OutputItem {
            url: "https://x/v.mp4".into(),
            kind: OutputKind::Video,
            meta: OutputMeta { duration_sec: Some(secs), ..OutputMeta::default() },
            copy: None,
        };
        let held = model.price_to_hold(&input());
        assert!(model.price_delivered(&input(), &[video(3.0)]) < held);
        assert_eq!(model.price_delivered(&input(), &[video(30.0)]), held);
    }

    #[test]
    fn a_duration_with_choices_allows_only_those() {
        let catalog = Catalog::builtin().unwrap();
        let kling = catalog.model("kling-2.1-master").unwrap().duration_sec.clone().unwrap();
        assert!(kling.allows(5) && kling.allows(10));
        assert!(!kling.allows(7), "Kling 2.1 master takes 5 or 10 seconds only");
        let seedance = catalog.model("seedance-2.0-fast").unwrap().duration_sec.clone().unwrap();
        assert!((4..=15).all(|s| seedance.allows(s)));
    }
}
