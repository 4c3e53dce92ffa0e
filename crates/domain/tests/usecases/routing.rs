//! The step sends a job by the routes its preference leaves: in their order, only the first
//! without fallbacks, and, for a job that spills, the route with a free slot first, chosen from
//! the loads the store counts.

use genjobs_domain::capacity::{KeyLoad, ProviderLoad, WaitingJobs};
use genjobs_domain::ids::ModelId;
use genjobs_domain::routing::{RoutePreference, RouteSort};

use super::*;

/// The providers of flux-pro's two routes, in the catalog's order: the tests speak of the first
/// and the second route, not of any provider by name.
fn first_and_second() -> (String, String) {
    let catalog = genjobs_domain::catalog::Catalog::builtin().unwrap();
    let routes = &catalog.model("flux-pro").unwrap().routes;
    (routes[0].provider.clone(), routes[1].provider.clone())
}

/// A flux-pro job (two routes) with `routing`.
fn flux_job(routing: RoutePreference) -> Job {
    let request = image_request();
    let rate = Rate { per: Unit::Image, credits: 6, percent: PricePercent::FULL, batch_percent: PricePercent::FULL };
    Job::accept(JobId::new_at(t0()), owner(), ModelId::new("flux-pro"), Modality::Image, request.input, rate, t0())
        .0
        .with_routing(routing)
}

fn providers(model: &genjobs_domain::catalog::Model) -> Vec<String> {
    model.routes.iter().map(|route| route.provider.clone()).collect()
}

fn load(provider: &str, in_flight: u64) -> ProviderLoad {
    ProviderLoad {
        provider: provider.into(),
        keys: vec![KeyLoad { hint: "abcd".into(), in_flight, max_in_flight: 1 }],
        waiting: WaitingJobs::default(),
    }
}

async fn sends(mocks: Mocks, job: Job) {
    match mocks.steps().advance(job).await {
        Stepped::Unrecorded(_) => panic!("the submission was not recorded"),
        Stepped::Done(kept) => assert!(kept.is_some_and(|job| job.upstream().is_some()), "sent"),
    }
}

fn recording(mocks: &mut Mocks) {
    mocks.upstream.expect_key_hint().returning(|_| None);
    mocks.jobs.expect_commit().returning(applied);
    mocks.events.expect_publish().returning(|_| ());
}

#[tokio::test]
async fn a_spilling_job_reserves_first_where_a_slot_is_free_now() {
    let (first, second) = first_and_second();
    let spilled = vec![second.clone(), first.clone()];
    let mut mocks = Mocks::new();
    mocks.upstream = MockUpstreamProvider::new();
    let loads = vec![load(&first, 1), load(&second, 0)];
    mocks.upstream.expect_loads().times(1).returning(move || Ok(loads.clone()));
    mocks.upstream.expect_reserve().times(0);
    let (order, free_at) = (spilled.clone(), second.clone());
    mocks
        .upstream
        .expect_reserve_first()
        .withf(move |_, model| providers(model) == order)
        .times(1)
        .returning(move |_, _| Capacity::Free(Placement { provider: Some(free_at.clone()), ..Placement::default() }));
    let sent_at = second.clone();
    mocks
        .upstream
        .expect_submit_placed()
        .withf(move |_, model, _, placement| {
            providers(model) == spilled && placement.provider.as_deref() == Some(second.as_str())
        })
        .times(1)
        .returning(move |_, _, _, _| Ok(UpstreamRef::new(sent_at.clone(), "p1")));
    recording(&mut mocks);
    let spilling = RoutePreference { sort: Some(RouteSort::Wait), ..RoutePreference::default() };
    sends(mocks, flux_job(spilling)).await;
}

#[tokio::test]
async fn without_fallbacks_only_the_first_route_is_offered_and_no_load_is_read() {
    let (_, second) = first_and_second();
    let mut mocks = Mocks::new();
    mocks.upstream = MockUpstreamProvider::new();
    mocks.upstream.expect_loads().times(0);
    let only_second = vec![second.clone()];
    let offered = only_second.clone();
    mocks
        .upstream
        .expect_reserve()
        .withf(move |_, model| providers(model) == offered)
        .times(1)
        .returning(|_, _| Capacity::Free(Placement::default()));
    let sent_at = second.clone();
    mocks
        .upstream
        .expect_submit_placed()
        .withf(move |_, model, _, _| providers(model) == only_second)
        .times(1)
        .returning(move |_, _, _, _| Ok(UpstreamRef::new(sent_at.clone(), "p1")));
    recording(&mut mocks);
    let first_only = RoutePreference {
        order: vec![second],
        allow_fallbacks: false,
        sort: Some(RouteSort::Wait),
        ..RoutePreference::default()
    };
    sends(mocks, flux_job(first_only)).await;
}
