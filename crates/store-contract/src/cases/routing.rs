//! Routing preferences: a job's preference is kept with it, for whichever replica sends it.

use std::sync::Arc;

use genjobs_domain::routing::{RoutePreference, RouteSort};

use super::{LIMITS, Limits, Store, now, user_with};

/// A job's routing preference reads back as accepted, from the store (after a restart, by
/// another replica's claim) as from the accept's answer; a job that asked nothing reads back
/// the default.
pub async fn a_jobs_routing_preference_is_kept_with_it<S: Store>(store: Arc<S>) {
    let user = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let at = now();
    let preference = RoutePreference {
        order: vec!["replicate".into()],
        only: Some(vec!["replicate".into(), "fal".into()]),
        ignore: vec!["other".into()],
        allow_fallbacks: false,
        sort: Some(RouteSort::Wait),
    };
    let routed = super::new_job(user, 1, at).with_routing(preference.clone());
    let plain = super::new_job(user, 1, at);
    for (job, expected) in [(routed, preference), (plain, RoutePreference::default())] {
        let accepted = match store.accept(job, None, None, at).await.unwrap() {
            genjobs_domain::ports::Accepted::Created(job) => job,
            other => panic!("expected a created job, got {other:?}"),
        };
        assert_eq!(accepted.routing(), &expected);
        let read = store.job(accepted.id()).await.unwrap().unwrap();
        assert_eq!(read.routing(), &expected);
    }
}
