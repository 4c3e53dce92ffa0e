use super::*;
use crate::capacity::{KeyLoad, WaitingJobs};
use crate::catalog::Catalog;

/// flux-pro's two routes, their providers named `alpha` then `beta` (the domain knows no
/// provider by name), with a third route to `gamma`; spilling when `spill`.
fn model(spill: bool) -> Model {
    let mut document = Catalog::builtin().unwrap().model("flux-pro").unwrap().document();
    let mut third = document.routes[0].clone();
    third.provider = "gamma".into();
    document.routes.push(third);
    document.routes[0].provider = "alpha".into();
    document.routes[1].provider = "beta".into();
    document.spill = spill;
    Model::from_document("flux-pro", document).unwrap()
}

fn providers(routes: &[Route]) -> Vec<&str> {
    routes.iter().map(|route| route.provider.as_str()).collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|name| (*name).to_owned()).collect()
}

fn draft(change: impl FnOnce(&mut PreferenceDraft)) -> Result<RoutePreference, InvalidRequest> {
    let mut draft = PreferenceDraft::default();
    change(&mut draft);
    RoutePreference::from_draft(draft)
}

#[test]
fn only_and_ignore_filter_and_order_puts_the_named_first() {
    let model = model(false);
    let only = draft(|d| d.only = Some(names(&["beta", "gamma"]))).unwrap();
    assert_eq!(providers(&only.routes(&model)), ["beta", "gamma"]);
    let ignore = draft(|d| d.ignore = Some(names(&["alpha"]))).unwrap();
    assert_eq!(providers(&ignore.routes(&model)), ["beta", "gamma"]);
    let order = draft(|d| d.order = Some(names(&["gamma", "beta"]))).unwrap();
    assert_eq!(providers(&order.routes(&model)), ["gamma", "beta", "alpha"]);
    let first_only = draft(|d| {
        d.order = Some(names(&["beta"]));
        d.allow_fallbacks = Some(false);
    })
    .unwrap();
    assert_eq!(providers(&first_only.routes(&model)), ["beta"]);
    assert_eq!(providers(&RoutePreference::default().routes(&model)), ["alpha", "beta", "gamma"]);
}

#[test]
fn an_empty_only_an_unknown_sort_an_unknown_name_or_no_route_left_is_refused() {
    let param = |refused: InvalidRequest| refused.param.unwrap_or_default();
    assert_eq!(param(draft(|d| d.only = Some(Vec::new())).unwrap_err()), "provider");
    assert_eq!(param(draft(|d| d.sort = Some("price".into())).unwrap_err()), "provider.sort");
    let model = model(false);
    let known = |name: &str| ["alpha", "beta", "gamma"].contains(&name);
    let unknown = draft(|d| d.ignore = Some(names(&["alpha", "nobody"]))).unwrap();
    assert_eq!(param(unknown.check(&model, known, known).unwrap_err()), "provider.ignore[1]");
    let nothing_left = draft(|d| d.ignore = Some(names(&["alpha", "beta", "gamma"]))).unwrap();
    assert_eq!(param(nothing_left.check(&model, known, known).unwrap_err()), "provider");
    let unconfigured = draft(|d| d.only = Some(names(&["gamma"]))).unwrap();
    assert_eq!(param(unconfigured.check(&model, known, |name| name != "gamma").unwrap_err()), "provider");
    assert_eq!(unconfigured.check(&model, known, known), Ok(()));
}

#[test]
fn a_model_that_spills_spills_unless_the_request_keeps_to_one_route() {
    assert!(!RoutePreference::default().spills(&model(false)));
    assert!(RoutePreference::default().spills(&model(true)));
    assert!(draft(|d| d.sort = Some("wait".into())).unwrap().spills(&model(false)));
    assert!(!draft(|d| d.allow_fallbacks = Some(false)).unwrap().spills(&model(true)));
}

fn load(provider: &str, in_flight: u64, cap: u32, waiting: u64) -> ProviderLoad {
    ProviderLoad {
        provider: provider.into(),
        keys: vec![KeyLoad { hint: "abcd".into(), in_flight, max_in_flight: cap }],
        waiting: WaitingJobs { normal: waiting, low: 0 },
    }
}

#[test]
fn spill_over_takes_the_first_provider_with_a_free_slot_else_the_fewest_waiting() {
    let routes = model(false).routes;
    let full_alpha = [load("alpha", 2, 2, 0), load("beta", 0, 1, 0), load("gamma", 0, 1, 0)];
    assert_eq!(providers(&spill_order(routes.clone(), &full_alpha)), ["beta", "alpha", "gamma"]);
    let room_at_alpha = [load("alpha", 1, 2, 0), load("beta", 0, 1, 0)];
    assert_eq!(providers(&spill_order(routes.clone(), &room_at_alpha)), ["alpha", "beta", "gamma"]);
    let all_full = [load("alpha", 1, 1, 3), load("beta", 1, 1, 1), load("gamma", 1, 1, 1)];
    assert_eq!(providers(&spill_order(routes.clone(), &all_full)), ["beta", "alpha", "gamma"]);
    let uncapped_gamma = [load("alpha", 1, 1, 0), load("beta", 1, 1, 0), load("gamma", 9, 0, 0)];
    assert_eq!(providers(&spill_order(routes, &uncapped_gamma)), ["gamma", "alpha", "beta"]);
}
