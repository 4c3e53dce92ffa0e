//! Submitting: holds at the catalog's price, each refusal mapped, the idempotency claim.

use super::*;

#[tokio::test]
async fn submit_holds_the_catalog_price_and_answers_queued() {
    let mut mocks = Mocks::new();
    mocks
        .jobs
        .expect_accept()
        .withf(|job, claim, lease, _| {
            job.credits_held() == Credits::new(12) && job.user_id() == owner() && claim.is_none() && lease.is_none()
        })
        .times(1)
        .returning(|job, _, _, _| Ok(Accepted::Created(job)));
    let receipt = mocks
        .services(Settings::default())
        .submissions
        .submit(&caller(), Submission { request: image_request(), received: received(), idempotency: None })
        .await;
    let receipt = receipt.unwrap();
    assert_eq!(
        (receipt.state, receipt.credits_held, receipt.model.as_str()),
        (JobState::Queued, Credits::new(12), "nano-banana")
    );
}

fn exceeded() -> BudgetExceeded {
    let budget = KeyBudget { credits: Credits::new(10), period: BudgetPeriod::Day };
    BudgetExceeded { budget, used: Credits::new(8), cost: Credits::new(12), whose: BudgetOwner::Key }
}

#[tokio::test]
async fn submit_maps_each_refusal() {
    for (refusal, expected) in [
        (
            AcceptError::InsufficientCredits { needed: Credits::new(12), available: Credits::new(3) },
            SubmitError::InsufficientCredits { needed: Credits::new(12), available: Credits::new(3) },
        ),
        (AcceptError::ConcurrencyLimit { limit: 2 }, SubmitError::ConcurrencyLimit { limit: 2 }),
        (AcceptError::KeyConcurrencyLimit { limit: 1 }, SubmitError::KeyConcurrencyLimit { limit: 1 }),
        (AcceptError::KeyBudgetExceeded(exceeded()), SubmitError::KeyBudgetExceeded(exceeded())),
        (AcceptError::IdempotencyConflict, SubmitError::IdempotencyConflict),
        (
            AcceptError::Store(StoreError::Unavailable("down".into())),
            SubmitError::Store(StoreError::Unavailable("down".into())),
        ),
    ] {
        let mut mocks = Mocks::new();
        mocks.jobs.expect_accept().return_once(move |_, _, _, _| Err(refusal));
        let result = mocks
            .services(Settings::default())
            .submissions
            .submit(&caller(), Submission { request: image_request(), received: received(), idempotency: None })
            .await;
        assert_eq!(result, Err(expected));
    }
}

#[tokio::test]
async fn submit_passes_the_idempotency_claim() {
    let mut mocks = Mocks::new();
    let fingerprint = "f1ngerpr1nt".to_owned();
    let expected = fingerprint.clone();
    mocks
        .jobs
        .expect_accept()
        .withf(move |_, claim, _, _| claim.as_ref().is_some_and(|c| c.key == "k-1" && c.fingerprint == expected))
        .returning(|job, _, _, _| Ok(Accepted::Replayed(job)));
    let submission = Submission {
        request: image_request(),
        received: received(),
        idempotency: Some((IdempotencyKey::parse("k-1").unwrap(), fingerprint)),
    };
    assert!(mocks.services(Settings::default()).submissions.submit(&caller(), submission).await.is_ok());
}

#[test]
fn idempotency_keys_are_1_to_255_characters() {
    assert!(IdempotencyKey::parse("").is_err());
    assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
    assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
}
