//! Request bodies, read once from JSON into the API's types ([`read`]), then turned into the
//! domain's requests, where the domain's rules (ranges, choices, the catalog) apply. A value of
//! the wrong type, or a field the endpoint does not have, is refused by serde; the refusal's
//! `param` is the body field at the head of the serde path.

use genjobs_api::{Grant, ImageRequest, NewUser, ProviderPreference, UserPatch, VideoRequest};
use genjobs_domain::catalog::Catalog;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::UserChange;
use genjobs_domain::request::{GenerationDraft, GenerationRequest, ReceivedRequest, WholeNumber};
use genjobs_domain::routing::PreferenceDraft;
use genjobs_domain::usecases::{NewUserRequest, validate_grant, validate_user_change};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;
use sha2::{Digest, Sha256};

/// Reads a JSON object body into `T`.
///
/// # Errors
/// [`InvalidRequest`] for a body that is not an object; naming the field for a field `T` does
/// not have, a value of the wrong type, or a value holding U+0000.
pub fn read<T: DeserializeOwned>(body: &Value) -> Result<T, InvalidRequest> {
    let Value::Object(fields) = body else {
        return Err(InvalidRequest::body("the body must be a JSON object"));
    };
    let read = serde_path_to_error::deserialize(body).map_err(|refused| {
        let message = refused.inner().to_string();
        match refused.path().iter().next() {
            Some(Segment::Map { key }) => InvalidRequest::param(key, super::wording::field_refusal(key, &message)),
            _ => InvalidRequest::body(message),
        }
    })?;
    // U+0000 is refused everywhere, nested values of `extra` included: Postgres cannot keep it
    // in text or jsonb, and no prompt or parameter needs it.
    if let Some((field, _)) = fields.iter().find(|(_, value)| has_nul(value)) {
        return Err(InvalidRequest::param(field, format!("`{field}` must not contain the character U+0000")));
    }
    Ok(read)
}

fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn exact(n: Option<impl Into<u64>>) -> Option<WholeNumber> {
    n.map(|n| WholeNumber::Exact(n.into()))
}

/// The domain's validated request of a video body.
///
/// # Errors
/// [`InvalidRequest`] from the domain's rules.
pub fn video_request(body: VideoRequest, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
    let (priority, start_within, provider) = (body.priority.clone(), body.start_within_secs, body.provider.clone());
    GenerationRequest::validate(Modality::Video, video_draft(body), catalog)?
        .with_priority(priority.as_deref())?
        .with_start_within(start_within)?
        .with_routing(provider.map(preference_draft))
}

/// The domain's draft of a `provider` object.
fn preference_draft(sent: ProviderPreference) -> PreferenceDraft {
    PreferenceDraft {
        order: sent.order,
        only: sent.only,
        ignore: sent.ignore,
        allow_fallbacks: sent.allow_fallbacks,
        sort: sent.sort,
    }
}

fn video_draft(body: VideoRequest) -> GenerationDraft {
    GenerationDraft {
        prompt: Some(body.prompt),
        model: body.model,
        negative_prompt: body.negative_prompt,
        aspect_ratio: body.aspect_ratio,
        resolution: body.resolution,
        duration_sec: exact(body.duration_sec),
        n: None,
        seed: exact(body.seed),
        image_inputs: body.image_inputs,
        extra: body.extra,
        webhook_url: body.webhook_url,
    }
}

/// The domain's validated request of an image body.
///
/// # Errors
/// [`InvalidRequest`] from the domain's rules.
pub fn image_request(body: ImageRequest, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
    let (priority, start_within, provider) = (body.priority.clone(), body.start_within_secs, body.provider.clone());
    GenerationRequest::validate(Modality::Image, image_draft(body), catalog)?
        .with_priority(priority.as_deref())?
        .with_start_within(start_within)?
        .with_routing(provider.map(preference_draft))
}

fn image_draft(body: ImageRequest) -> GenerationDraft {
    GenerationDraft {
        prompt: Some(body.prompt),
        model: body.model,
        negative_prompt: body.negative_prompt,
        aspect_ratio: body.aspect_ratio,
        resolution: None,
        duration_sec: None,
        n: exact(body.n),
        seed: exact(body.seed),
        image_inputs: body.image_inputs,
        extra: body.extra,
        webhook_url: body.webhook_url,
    }
}

/// Reads the body of the generation endpoint of `endpoint` into the domain's request. Its whole
/// number fields go to the domain whatever they hold, so that a refusal states the field's rule
/// (`n` from 1 to 4) rather than a type; a form drawn from the models list sends a `select`
/// option's text ("10"), which the domain takes where the model's field is such a select.
///
/// # Errors
/// As [`read`], then as the endpoint's conversion.
pub fn generation_request(
    endpoint: Modality,
    body: &Value,
    catalog: &Catalog,
) -> Result<GenerationRequest, InvalidRequest> {
    let mut rest = body.clone();
    let mut judged = |name: &str| match &mut rest {
        Value::Object(fields) => fields.remove(name).filter(|value| !value.is_null()).map(|value| whole_number(&value)),
        _ => None,
    };
    let (n, seed, duration_sec) = match endpoint {
        Modality::Video => (None, judged("seed"), judged("duration_sec")),
        _ => (judged("n"), judged("seed"), None),
    };
    let (draft, priority, start_within, provider) = match endpoint {
        Modality::Video => {
            let body: VideoRequest = read(&rest)?;
            let (priority, start_within, provider) =
                (body.priority.clone(), body.start_within_secs, body.provider.clone());
            (video_draft(body), priority, start_within, provider)
        }
        _ => {
            let body: ImageRequest = read(&rest)?;
            let (priority, start_within, provider) =
                (body.priority.clone(), body.start_within_secs, body.provider.clone());
            (image_draft(body), priority, start_within, provider)
        }
    };
    let draft = GenerationDraft {
        n: n.or(draft.n),
        seed: seed.or(draft.seed),
        duration_sec: duration_sec.or(draft.duration_sec),
        ..draft
    };
    GenerationRequest::validate(endpoint_modality(endpoint), draft, catalog)?
        .with_priority(priority.as_deref())?
        .with_start_within(start_within)?
        .with_routing(provider.map(preference_draft))
}

/// The modality a generation endpoint validates as: the image endpoint's for every other.
fn endpoint_modality(endpoint: Modality) -> Modality {
    if endpoint == Modality::Video { Modality::Video } else { Modality::Image }
}

/// A JSON value as a whole number field holds it.
#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "checked to be whole and in range")]
fn whole_number(value: &Value) -> WholeNumber {
    match value {
        Value::Number(number) => match (number.as_u64(), number.as_f64()) {
            (Some(n), _) => WholeNumber::Exact(n),
            (None, Some(f)) if f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&f) => WholeNumber::Exact(f as u64),
            _ => WholeNumber::Other,
        },
        Value::String(text) => WholeNumber::Text(text.clone()),
        _ => WholeNumber::Other,
    }
}

/// A fingerprint of a generation request for idempotency: the endpoint and the canonical JSON of
/// the body (keys sorted), so that key order and white space do not make two equal bodies differ.
#[must_use]
pub fn request_fingerprint(endpoint: Modality, body: &Value) -> String {
    fingerprint(endpoint.as_str(), body)
}

/// The body a submission arrived with, kept with its job as it is (a body that is not an object
/// was refused before).
#[must_use]
pub fn received(body: &Value) -> ReceivedRequest {
    received_as_is(body.clone())
}

/// [`received`] of a body the caller no longer needs, kept without a copy.
#[must_use]
pub fn received_as_is(body: Value) -> ReceivedRequest {
    match body {
        Value::Object(fields) => ReceivedRequest::new(fields),
        _ => ReceivedRequest::new(serde_json::Map::new()),
    }
}

/// A fingerprint of the request `body` (its fields and values, keys sorted) made to `endpoint`.
#[must_use]
pub fn fingerprint(endpoint: &str, body: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(endpoint.as_bytes());
    hasher.update([0]);
    hasher.update(body.to_string().as_bytes());
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The domain's validated new user.
///
/// # Errors
/// [`InvalidRequest`] naming `name` or `credits` when absent; from the domain's rules.
pub fn new_user_request(body: NewUser) -> Result<NewUserRequest, InvalidRequest> {
    let name =
        body.name.ok_or_else(|| InvalidRequest::param("name", "`name` must be a string of 1 to 200 characters"))?;
    let credits =
        body.credits.ok_or_else(|| InvalidRequest::param("credits", "`credits` must be a non-negative integer"))?;
    NewUserRequest::validate(&name, credits, body.rate_limit_per_minute, body.max_concurrent_jobs, body.price_percent)
}

/// The domain's validated change to a user.
///
/// # Errors
/// [`InvalidRequest`] naming the field at fault.
pub fn user_change(body: UserPatch) -> Result<UserChange, InvalidRequest> {
    validate_user_change(body.rate_limit_per_minute, body.max_concurrent_jobs, body.price_percent)
}

/// The domain's validated grant.
///
/// # Errors
/// [`InvalidRequest`] naming `amount` when absent; from the domain's rules.
pub fn grant_amount(body: Grant) -> Result<i64, InvalidRequest> {
    let amount = body.amount.ok_or_else(|| InvalidRequest::param("amount", "`amount` must be a non-zero integer"))?;
    validate_grant(amount)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn generation(endpoint: Modality, body: Value) -> Result<GenerationRequest, InvalidRequest> {
        generation_request(endpoint, &body, &Catalog::builtin().unwrap())
    }

    #[test]
    fn wrong_types_and_unknown_fields_name_their_param() {
        let cases = [
            (Modality::Video, json!({"prompt": 5}), "prompt"),
            (Modality::Video, json!({"prompt": "a", "duration_sec": "five"}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "duration_sec": 5.5}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "seed": -1}), "seed"),
            (Modality::Video, json!({"prompt": "a", "image_inputs": "https://a/b.png"}), "image_inputs"),
            (Modality::Video, json!({"prompt": "a", "image_inputs": [5]}), "image_inputs"),
            (Modality::Video, json!({"prompt": "a", "extra": [1]}), "extra"),
            (Modality::Video, json!({"prompt": "a", "n": 2}), "n"),
            (Modality::Image, json!({"prompt": "a", "duration_sec": 5}), "duration_sec"),
            (Modality::Video, json!({"prompt": "a", "surprise": true}), "surprise"),
            (Modality::Video, json!({"prompt": null}), "prompt"),
            (Modality::Image, json!({}), "prompt"),
        ];
        for (endpoint, body, param) in cases {
            let refused = generation(endpoint, body.clone()).unwrap_err();
            assert_eq!(refused.param.as_deref(), Some(param), "{body}");
        }
        assert_eq!(generation(Modality::Image, json!(["prompt"])).unwrap_err().param, None);
    }

    #[test]
    fn a_nul_character_anywhere_is_refused_with_its_field() {
        for (body, param) in [
            (json!({"prompt": "\u{0} sunset"}), "prompt"),
            (json!({"prompt": "a", "extra": {"deep": [{"k": "x\u{0}"}]}}), "extra"),
            (json!({"prompt": "a", "extra": {"k\u{0}": 1}}), "extra"),
            (json!({"prompt": "a", "image_inputs": ["https://a/\u{0}.png"]}), "image_inputs"),
        ] {
            let refused = read::<ImageRequest>(&body).unwrap_err();
            assert_eq!(refused.param.as_deref(), Some(param), "{body}");
        }
        let name = read::<NewUser>(&json!({"name": "a\u{0}", "credits": 1})).unwrap_err();
        assert_eq!(name.param.as_deref(), Some("name"));
    }

    #[test]
    fn null_is_absent_and_whole_floats_are_whole() {
        let request =
            generation(Modality::Video, json!({"prompt": "a", "seed": null, "duration_sec": 4.0, "extra": {"k": [1]}}))
                .unwrap();
        assert_eq!((request.input.seed, request.input.duration_sec), (None, Some(4)));
        assert!(request.input.extra.is_some());
    }

    #[test]
    fn a_duration_may_be_the_text_of_a_select_option_only() {
        let kling = |duration: &str| {
            generation(Modality::Video, json!({"prompt": "a", "model": "kling-2.1-master", "duration_sec": duration}))
        };
        assert_eq!(kling("10").unwrap().input.duration_sec, Some(10));
        assert_eq!(kling("7").unwrap_err().param.as_deref(), Some("duration_sec"));
        // Where the duration is a number field, text is a wrong type.
        let number = generation(Modality::Video, json!({"prompt": "a", "duration_sec": "5"})).unwrap_err();
        assert_eq!(number.param.as_deref(), Some("duration_sec"));
    }

    #[test]
    fn fingerprints_ignore_key_order_but_not_values_or_endpoint() {
        let a: Value = serde_json::from_str(r#"{"prompt":"x","n":2}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "n": 2, "prompt": "x" }"#).unwrap();
        assert_eq!(request_fingerprint(Modality::Image, &a), request_fingerprint(Modality::Image, &b));
        assert_ne!(request_fingerprint(Modality::Image, &a), request_fingerprint(Modality::Video, &a));
        let other = json!({"prompt": "y", "n": 2});
        assert_ne!(request_fingerprint(Modality::Image, &a), request_fingerprint(Modality::Image, &other));
    }

    #[test]
    fn admin_bodies_are_read_then_validated() {
        let new_user = |body: Value| read::<NewUser>(&body).and_then(new_user_request);
        let user = new_user(json!({"name": "ada", "credits": 10, "max_concurrent_jobs": 2})).unwrap();
        assert_eq!(user.max_concurrent_jobs, Some(2));
        for (body, param) in [
            (json!({"credits": 1}), "name"),
            (json!({"name": "a"}), "credits"),
            (json!({"name": "a", "credits": -1}), "credits"),
            (json!({"name": "a", "credits": 1, "rate_limit_per_minute": -3}), "rate_limit_per_minute"),
            (json!({"name": "a", "credits": 1, "admin": true}), "admin"),
        ] {
            assert_eq!(new_user(body.clone()).unwrap_err().param.as_deref(), Some(param), "{body}");
        }
        let grant = |body: Value| read::<Grant>(&body).and_then(grant_amount);
        assert_eq!(grant(json!({"amount": -5})), Ok(-5));
        for body in [json!({"amount": 1.5}), json!({}), json!({"amount": 0}), json!({"amount": 1, "to": "x"})] {
            assert!(grant(body.clone()).is_err(), "{body}");
        }
    }
}
