//! The property money safety rests on: for every model of the catalog, any valid request and any
//! `extra` the service accepts, what the fal adapter would send can never cost more than the
//! credits held for it by the model's price rule. The cost is read back from the provider request
//! itself (how many images, how many seconds at which resolution), so that a key `extra` slips
//! past the mapping shows up as a higher cost.
//!
//! A second property holds the shipped documents to their price rules: each covers every field
//! that changes the cost.
//!
//! 1,024 cases a run; failures are not persisted (`failure_persistence: None`), and proptest's
//! own random seed varies from run to run, so that every CI run explores new requests.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use genjobs_domain::catalog::{Catalog, Model, Unit};
use genjobs_domain::modality::Modality;
use genjobs_domain::request::{GenerationDraft, GenerationRequest, WholeNumber};
use genjobs_upstream_fal::routes::{fal_request, refused_extra_key};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Keys a client might try in `extra`: every parameter that drives cost at fal, and harmless ones.
const KEYS: &[&str] = &[
    "num_images",
    "duration",
    "resolution",
    "seed",
    "image_size",
    "aspect_ratio",
    "prompt",
    "image_url",
    "image_urls",
    "num_frames",
    "rendering_speed",
    "safety_tolerance",
    "raw",
    "output_format",
    "cfg_scale",
    "enable_safety_checker",
    "style",
];

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..100).prop_map(Value::from),
        "[0-9]{1,3}".prop_map(Value::from),
        prop_oneof![Just("1080p"), Just("720p"), Just("QUALITY"), Just("square_hd"), Just("15")].prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ]
}

fn extra() -> impl Strategy<Value = Option<Map<String, Value>>> {
    proptest::option::of(
        proptest::collection::btree_map(proptest::sample::select(KEYS), value(), 0..4)
            .prop_map(|pairs| pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<String, Value>>()),
    )
}

/// A request the catalog accepts for one of its models.
fn request(catalog: &Catalog) -> impl Strategy<Value = GenerationRequest> {
    let models: Vec<Model> = catalog.models_of(None).cloned().collect();
    (proptest::sample::select(models), 0usize..8, 0u64..6, 1u64..5, proptest::option::of(0u64..5), extra())
        .prop_filter_map("a request the catalog accepts", |(model, ratio, resolution, n, seconds, extra)| {
            let video = model.modality == Modality::Video;
            let duration = seconds.and_then(|s| model.duration_sec.as_ref().map(|d| u64::from(d.min) + s));
            let draft = GenerationDraft {
                prompt: Some("a lighthouse".into()),
                model: Some(model.id.to_string()),
                aspect_ratio: model.aspect_ratios.get(ratio % model.aspect_ratios.len().max(1)).cloned(),
                resolution: model.resolutions.get(resolution as usize % model.resolutions.len().max(1)).cloned(),
                duration_sec: duration.map(WholeNumber::Exact),
                n: (!video).then_some(WholeNumber::Exact(n)),
                extra,
                ..GenerationDraft::default()
            };
            GenerationRequest::validate(model.modality, draft, &Catalog::builtin().unwrap()).ok()
        })
}

/// What fal would bill for `body` by the model's price rule.
fn cost(model: &Model, body: &Value, route_resolution: Option<&str>) -> u64 {
    let number = |v: &Value| v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok()));
    let price = &model.price;
    match price.per {
        Unit::Image => body.get("num_images").and_then(number).unwrap_or(1) * price.credits,
        Unit::Second => {
            let seconds = body.get("duration").and_then(number).unwrap_or(u64::MAX / 1_000_000);
            let resolution = body.get("resolution").and_then(Value::as_str).or(route_resolution);
            let rate = resolution.and_then(|r| price.by_resolution.get(r)).copied().unwrap_or(price.credits);
            seconds * rate
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn what_is_sent_never_costs_more_than_what_is_held(request in request(&Catalog::builtin().unwrap())) {
        let catalog = Catalog::builtin().unwrap();
        let model = catalog.model(request.model.as_str()).unwrap();
        let refused = request.input.extra.as_ref().and_then(|extra| refused_extra_key(model, extra));
        prop_assume!(refused.is_none(), "the service refuses it before holding anything");
        let sent = fal_request(model, &request.input).unwrap();
        let held = model.price_to_hold(&request.input).get();
        let cost = cost(model, &sent.body, request.input.resolution.as_deref());
        prop_assert!(cost <= held, "{} costs {cost} > {held} held: {}", model.id, sent.body);
    }

    /// Every shipped model's price covers every field that changes what fal charges: the hold
    /// grows with the images or the seconds asked for, is never zero, and a model offering
    /// several resolutions prices each one by name.
    #[test]
    fn every_shipped_price_covers_what_changes_cost(request in request(&Catalog::builtin().unwrap())) {
        let catalog = Catalog::builtin().unwrap();
        let model = catalog.model(request.model.as_str()).unwrap();
        let units = match model.price.per {
            Unit::Image => u64::from(request.input.n.unwrap_or(1)),
            Unit::Second => u64::from(request.input.duration_sec.unwrap_or(0)),
        };
        let held = model.price_to_hold(&request.input).get();
        prop_assert!(held > 0, "{} holds nothing", model.id);
        prop_assert_eq!(held, model.rate(&request.input).credits * units);
        if model.resolutions.len() > 1 {
            for resolution in &model.resolutions {
                prop_assert!(model.price.by_resolution.contains_key(resolution), "{} {resolution}", model.id);
            }
        }
    }
}

#[test]
fn a_body_that_asks_for_more_is_priced_higher_than_held() {
    // The property's cost function sees what it must: were `num_images` let through, the cost
    // would exceed the hold.
    let catalog = Catalog::builtin().unwrap();
    let model = catalog.model("nano-banana").unwrap();
    assert_eq!(cost(model, &json!({"num_images": 4}), None), 4 * cost(model, &json!({}), None));
}
