//! An OpenAI-compatible moderation endpoint, `POST /moderations`, so that the embedded default
//! (and the tests and the soak) can show moderation without an outside service.
//!
//! It answers OpenAI's shape, `{id, model, results: [{flagged, categories, category_scores}]}`,
//! one result for the whole input, from a word list: an input (the text, or an image's URL) that
//! holds one of [`FLAGGED_WORDS`] is flagged under its categories, case aside. Directives in the
//! text make it fail as a moderation service fails: `[sim:moderation-503]` answers 503 every
//! time, `[sim:moderation-fail-first=N]` answers 503 to the first N checks of that text, then
//! as usual. With chaos on, a call fails at random (500 or 503) at the chaos rate.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{Sim, chaos};

/// Every category OpenAI's moderation models answer, each in every result.
const CATEGORIES: [&str; 13] = [
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/instructions",
    "self-harm/intent",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
];

/// The words the simulator flags, each with the categories it flags.
pub const FLAGGED_WORDS: [(&str, &[&str]); 4] = [
    ("gore", &["violence", "violence/graphic"]),
    ("nsfw", &["sexual"]),
    ("hateful", &["hate"]),
    ("self-harm", &["self-harm"]),
];

/// The texts checked so far, with how many times, for `[sim:moderation-fail-first=N]`.
#[derive(Default)]
pub(crate) struct Checks(Mutex<HashMap<String, u32>>);

impl Checks {
    /// Counts one more check of `text`; how many there were before.
    fn count(&self, text: &str) -> u32 {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = seen.entry(text.to_owned()).or_default();
        *count += 1;
        *count - 1
    }
}

#[derive(Deserialize)]
pub(crate) struct ModerationBody {
    #[serde(default)]
    model: Option<String>,
    input: Input,
}

/// OpenAI's `input`: a string, a list of strings, or a list of typed parts.
#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Texts(Vec<String>),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Deserialize)]
struct ImageUrl {
    url: String,
}

impl Input {
    /// The text parts, joined, and every part (text or image URL) to look words up in.
    fn read(self) -> (String, Vec<String>) {
        let parts: Vec<(bool, String)> = match self {
            Input::Text(text) => vec![(true, text)],
            Input::Texts(texts) => texts.into_iter().map(|text| (true, text)).collect(),
            Input::Parts(parts) => parts
                .into_iter()
                .map(|part| match part {
                    Part::Text { text } => (true, text),
                    Part::ImageUrl { image_url } => (false, image_url.url),
                })
                .collect(),
        };
        let text = parts.iter().filter(|(is_text, _)| *is_text).map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(" ");
        (text, parts.into_iter().map(|(_, part)| part).collect())
    }
}

/// How many checks of a text fail first, from its `[sim:moderation-fail-first=N]`.
fn fails_first(text: &str) -> u32 {
    text.split("[sim:moderation-fail-first=")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub(crate) async fn moderate(sim: web::Data<Sim>, body: web::Json<ModerationBody>) -> HttpResponse {
    sim.state.count("moderations", None);
    let ModerationBody { model, input } = body.into_inner();
    let (text, parts) = input.read();
    let failing_first = fails_first(&text);
    let checked_before = match failing_first {
        0 => 0,
        _ => sim.moderation_checks.count(&text),
    };
    if text.contains("[sim:moderation-503]") || checked_before < failing_first {
        sim.state.count("moderations_failed", None);
        return HttpResponse::ServiceUnavailable().json(json!({"error": {"message": "moderation unavailable"}}));
    }
    if let Some(fault) = chaos::draw(sim.config.chaos) {
        sim.state.count("moderations_failed", None);
        return match fault {
            chaos::Fault::Unavailable | chaos::Fault::Hang => HttpResponse::ServiceUnavailable().finish(),
            _ => HttpResponse::InternalServerError().json(json!({})),
        };
    }
    let flagged: Vec<&str> = FLAGGED_WORDS
        .iter()
        .filter(|(word, _)| parts.iter().any(|part| part.to_ascii_lowercase().contains(word)))
        .flat_map(|(_, categories)| categories.iter().copied())
        .collect();
    let categories: Map<String, Value> =
        CATEGORIES.iter().map(|name| ((*name).to_owned(), Value::Bool(flagged.contains(name)))).collect();
    let scores: Map<String, Value> = CATEGORIES
        .iter()
        .map(|name| ((*name).to_owned(), json!(if flagged.contains(name) { 0.97 } else { 0.0001 })))
        .collect();
    if !flagged.is_empty() {
        sim.state.count("moderations_flagged", None);
    }
    HttpResponse::Ok().json(json!({
        "id": format!("modr-{}", uuid::Uuid::new_v4().simple()),
        "model": model.unwrap_or_else(|| "omni-moderation-latest".to_owned()),
        "results": [{"flagged": !flagged.is_empty(), "categories": categories, "category_scores": scores}],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fail_first_directive_names_its_count() {
        assert_eq!(fails_first("a fox [sim:moderation-fail-first=2]"), 2);
        assert_eq!(fails_first("a fox"), 0);
    }

    #[test]
    fn typed_parts_give_the_text_and_every_url() {
        let input: Input = serde_json::from_value(json!([
            {"type": "text", "text": "a fox"},
            {"type": "image_url", "image_url": {"url": "https://x/gore.png"}},
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(input.read(), ("a fox".to_owned(), vec!["a fox".to_owned(), "https://x/gore.png".to_owned()]));
    }
}
