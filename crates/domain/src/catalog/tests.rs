use serde_json::{Value, json};

use super::*;
use crate::credits::Credits;
use crate::input::GenerationInput;
use crate::output::{OutputItem, OutputKind, OutputMeta};

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

fn document_of(id: &str) -> Value {
    Catalog::builtin().unwrap().model(id).unwrap().document().to_value()
}

fn fault(mut document: Value, change: impl FnOnce(&mut Value)) -> DocumentFault {
    change(&mut document);
    let id = document["id"].as_str().unwrap_or("x").to_owned();
    ModelDocument::from_value(document).and_then(|d| Model::from_document(&id, d)).unwrap_err()
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
    for field in catalog.managed().flat_map(|m| &m.fields) {
        assert!(!field.name.contains('_'), "{}", field.name);
    }
}

#[test]
fn a_document_reads_back_as_it_was_written() {
    for model in Catalog::builtin().unwrap().managed() {
        let again = ModelDocument::from_value(model.document().to_value()).unwrap();
        assert_eq!(Model::from_document(model.id.as_str(), again).unwrap(), *model);
    }
}

#[test]
fn duplicate_ids_are_refused() {
    let models = Catalog::builtin_models().unwrap();
    let twice = models.iter().chain(models.first()).cloned().collect();
    assert!(matches!(Catalog::from_models(twice, 0), Err(CatalogError::Duplicate(_))));
}

#[test]
fn faults_are_named_by_their_json_path() {
    let seedance = document_of("seedance-2.0-fast");
    let nano = document_of("nano-banana");
    let path = |f: DocumentFault| f.path;
    assert_eq!(path(fault(nano.clone(), |d| d["price"] = json!({"per": "image"}))), "price.credits");
    assert_eq!(path(fault(nano.clone(), |d| d["price"]["credits"] = json!(-1))), "price.credits");
    assert_eq!(path(fault(nano.clone(), |d| d["price"]["per"] = json!("second"))), "price.per");
    assert_eq!(path(fault(nano.clone(), |d| d["routes"] = json!([]))), "routes");
    assert_eq!(path(fault(nano.clone(), |d| d["fields"][1]["default"] = json!("7:5"))), "fields[1].default");
    assert_eq!(path(fault(nano, |d| d["id"] = json!("no spaces"))), "id");
    assert_eq!(
        path(fault(seedance.clone(), |d| d["price"]["by_resolution"]["4k"] = json!(20))),
        "price.by_resolution.4k"
    );
    assert_eq!(path(fault(seedance, |d| d["fields"][1]["max"] = json!(2))), "fields[1].min");
}

#[test]
fn form_fields_say_what_a_model_takes() {
    let catalog = Catalog::builtin().unwrap();
    let seedance = catalog.model("seedance-2.0-fast").unwrap();
    assert_eq!(seedance.resolutions, ["720p", "1080p"]);
    assert_eq!(seedance.default_resolution.as_deref(), Some("1080p"));
    assert_eq!(seedance.duration_sec, Some(DurationRange { min: 4, max: 15, default: 5, choices: vec![] }));
    let nano = catalog.model("nano-banana").unwrap();
    assert_eq!((nano.default_aspect_ratio.as_str(), nano.resolutions.is_empty()), ("1:1", true));
}

#[test]
fn deleted_and_disabled_models_are_not_offered_but_still_known() {
    let mut models = Catalog::builtin_models().unwrap();
    models[0].enabled = false;
    let (disabled, deleted) = (models[0].id.to_string(), models[1].id.to_string());
    let catalog = Catalog::with_deleted(models.into_iter().enumerate().map(|(i, m)| (m, i == 1)), 3).unwrap();
    for id in [&disabled, &deleted] {
        assert!(catalog.model(id).is_none() && catalog.any_model(id).is_some(), "{id}");
        assert!(catalog.models_of(None).all(|m| m.id.as_str() != id));
    }
    assert!(catalog.managed().any(|m| m.id.as_str() == disabled));
    assert!(catalog.managed().all(|m| m.id.as_str() != deleted));
}

#[test]
fn a_tier_scales_the_whole_jobs_price_rounded_up_once() {
    let percent = |p| PricePercent::new(p).unwrap();
    assert_eq!(percent(33).apply(Credits::new(4)), Credits::new(2), "1.32 rounds up to 2");
    assert_eq!(percent(150).apply(Credits::new(3)), Credits::new(5), "4.5 rounds up to 5");
    assert_eq!(percent(1000).apply(Credits::new(u64::MAX)), Credits::new(u64::MAX), "saturates");
    assert!(PricePercent::new(0).is_err() && PricePercent::new(1001).is_err());
    let rate = Rate { per: Unit::Second, credits: 3, percent: percent(150), batch_percent: PricePercent::FULL };
    let five_seconds = input();
    assert_eq!(rate.to_hold(&five_seconds), Credits::new(23), "15 × 1.5 = 22.5, rounded once per job");
    let video = OutputItem {
        url: "https://cdn/v.mp4".into(),
        kind: OutputKind::Video,
        meta: OutputMeta { duration_sec: Some(2.0), ..OutputMeta::default() },
        copy: None,
    };
    assert_eq!(rate.delivered(&five_seconds, &[video], Credits::new(23)), Credits::new(9), "6 × 1.5");
}

#[test]
fn video_price_is_per_second_at_the_resolution() {
    let catalog = Catalog::builtin().unwrap();
    let model = catalog.model("seedance-2.0-fast").unwrap();
    assert_eq!(model.price_to_hold(&input()).get(), model.price.by_resolution["720p"] * 5);
    let unnamed = GenerationInput { resolution: Some("480p".into()), ..input() };
    assert_eq!(model.price_to_hold(&unnamed).get(), model.price.credits * 5);
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
    let rate = model.rate(&input());
    let held = rate.to_hold(&input());
    assert!(rate.delivered(&input(), &[video(3.0)], held) < held);
    assert_eq!(rate.delivered(&input(), &[video(30.0)], held), held);
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

#[test]
fn a_live_catalog_never_moves_back() {
    let live = LiveCatalog::new(Catalog::builtin().unwrap());
    live.replace(Catalog::from_models(vec![], 5).unwrap());
    live.replace(Catalog::builtin().unwrap());
    assert_eq!((live.current().version(), live.current().models_of(None).count()), (5, 0));
}
