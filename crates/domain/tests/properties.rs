//! Property tests of the state machine: whatever sequence of triggers arrives (in any order,
//! repeated, late), a job becomes final at most once, its credits are held once and settled or
//! released at most once and never above the hold, and its progress never decreases.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use genjobs_domain::credits::{Balances, CreditMovement, Credits};
use genjobs_domain::ids::{JobId, ModelId, UserId};
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::{Job, JobError, JobErrorCode, JobState, Trigger, UpstreamRef};
use genjobs_domain::modality::Modality;
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use proptest::prelude::*;
use time::OffsetDateTime;

fn t0() -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000)
}

fn trigger() -> impl Strategy<Value = Trigger> {
    let at = t0();
    let output = OutputItem {
        url: "https://cdn/x.png".into(),
        kind: OutputKind::Image,
        meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
        copy: None,
    };
    prop_oneof![
        Just(Trigger::SubmitStarted { next_poll_at: at }),
        Just(Trigger::Submitted { upstream: UpstreamRef::new("test", "r"), next_poll_at: at, billing: None }),
        Just(Trigger::SubmitNotReached { next_poll_at: at }),
        Just(Trigger::UpstreamQueued { position: Some(3), next_poll_at: at }),
        (0u8..=120).prop_map(move |progress| Trigger::UpstreamRunning { progress, next_poll_at: at }),
        Just(Trigger::UpstreamUnreachable { next_poll_at: at }),
        (0u64..40).prop_map(move |actual| Trigger::Succeeded {
            outputs: vec![output.clone()],
            credits_actual: Credits::new(actual),
            reported_units: None,
        }),
        Just(Trigger::failed(JobError::new(JobErrorCode::UpstreamFailed, "boom"))),
        Just(Trigger::Cancel),
    ]
}

fn accepted(held: u64) -> (Job, CreditMovement) {
    let input = GenerationInput {
        prompt: "p".into(),
        negative_prompt: None,
        aspect_ratio: "1:1".into(),
        resolution: None,
        duration_sec: None,
        n: Some(1),
        seed: None,
        image_inputs: vec![],
        extra: None,
    };
    Job::accept(
        JobId::new_at(t0()),
        UserId::new_at(t0()),
        ModelId::new("nano-banana"),
        Modality::Image,
        input,
        Rate { per: Unit::Image, credits: held, percent: PricePercent::FULL, batch_percent: PricePercent::FULL },
        t0(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_trigger_sequence_keeps_the_invariants(held in 0u64..30, triggers in prop::collection::vec(trigger(), 0..24)) {
        let granted: u64 = 100;
        let (mut job, hold) = accepted(held);
        let mut balances = Balances::default().grant(granted as i64).unwrap().apply(hold).unwrap();
        let mut final_movements = 0;
        for trigger in triggers {
            let before = job.clone();
            match job.apply(trigger, t0()) {
                Err(_) => {}
                Ok(transition) => {
                    prop_assert!(!before.state().is_final(), "a final job changed");
                    prop_assert_eq!(transition.expected_version(), before.version());
                    if let Some(movement) = transition.movement() {
                        prop_assert!(!matches!(movement, CreditMovement::Hold(_)), "a transition never holds");
                        balances = balances.apply(movement).unwrap();
                        final_movements += 1;
                    }
                    prop_assert_eq!(transition.movement().is_some(), transition.job().state().is_final());
                    job = transition.into_job();
                }
            }
            prop_assert!(job.progress() >= before.progress(), "progress went down");
            prop_assert_eq!(job.progress() == 100, job.state() == JobState::Succeeded);
            prop_assert!(job.progress() <= 100);
            prop_assert_eq!(balances.total(), u128::from(granted), "credits are conserved");
        }
        prop_assert!(final_movements <= 1, "credits moved {} times", final_movements);
        match job.state() {
            JobState::Queued | JobState::Running => prop_assert_eq!(balances.held, Credits::new(held)),
            _ => {
                prop_assert_eq!(balances.held, Credits::ZERO);
                let actual = job.credits_actual().unwrap();
                prop_assert!(actual <= Credits::new(held));
                prop_assert_eq!(balances.spent, actual);
            }
        }
    }
}
