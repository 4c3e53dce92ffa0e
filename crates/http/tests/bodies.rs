//! Arbitrary JSON bodies through request validation: nothing panics, and every refusal of an
//! object body names the `param` at fault.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use genjobs_api::{Grant, NewUser};
use genjobs_domain::catalog::Catalog;
use genjobs_domain::modality::Modality;
use genjobs_http::dto::requests::{generation_request, grant_amount, new_user_request, read};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        "[ -~]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("16:9"),
            Just("1:1"),
            Just("720p"),
            Just("1080p"),
            Just("5"),
            Just("https://a/b.png"),
            Just("\u{0}")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Keys mostly from the bodies' own fields, so that values reach the domain's rules.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "prompt", "model", "duration_sec", "aspect_ratio", "resolution", "image_inputs", "seed",
            "negative_prompt", "extra", "n", "name", "credits", "amount", "rate_limit_per_minute",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z_]{1,10}",
    ]
}

fn body() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(key(), value(), 0..7).prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generation_bodies_never_panic_and_refusals_name_a_param(body in body(), video in any::<bool>()) {
        let catalog = Catalog::builtin().unwrap();
        let endpoint = if video { Modality::Video } else { Modality::Image };
        let parsed = generation_request(endpoint, &body, &catalog);
        if let Err(refusal) = parsed {
            prop_assert!(refusal.param.is_some(), "{} refused without a param: {}", body, refusal.message);
        }
    }

    #[test]
    fn admin_bodies_never_panic_and_refusals_name_a_param(body in body()) {
        if let Err(refusal) = read::<NewUser>(&body).and_then(new_user_request) {
            prop_assert!(refusal.param.is_some(), "{} refused without a param", body);
        }
        if let Err(refusal) = read::<Grant>(&body).and_then(grant_amount) {
            prop_assert!(refusal.param.is_some(), "{} refused without a param", body);
        }
    }
}
