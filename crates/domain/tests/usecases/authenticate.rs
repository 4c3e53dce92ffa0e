//! Authenticating a key: its hash, its expiry, its models, and the rates of its chain.

use super::*;

fn credential_for(key: &ApiKey) -> Credential {
    Credential {
        hash: key.hash(),
        prefix: key.prefix(),
        user_id: owner(),
        rate_limit_per_minute: 7,
        price_percent: PricePercent::FULL,
        settings: KeySettings::default(),
        own_rate_limit_per_minute: None,
        lineage: KeyLineage::default(),
    }
}

#[tokio::test]
async fn authenticate_checks_the_hash_then_the_rate_limit() {
    let key = ApiKey::generate();
    let mut mocks = Mocks::new();
    let stored = credential_for(&key);
    mocks.accounts.expect_credentials().with(eq(key.prefix())).returning(move |_| Ok(vec![stored.clone()]));
    mocks
        .rate_limiter
        .expect_acquire()
        .with(eq(RateBucket::user(owner())), eq(7))
        .times(1)
        .returning(|_, _| Ok(RateDecision::Allowed));
    mocks.accounts.expect_record_key_use().with(eq(key.prefix()), eq(t0())).times(1).returning(|_, _| Ok(()));
    let expected =
        Caller { key: Some(CallerKey { prefix: key.prefix(), settings: Arc::default(), subtree: None }), ..caller() };
    assert_eq!(mocks.services(Settings::default()).accounts.authenticate(key.expose()).await, Ok(expected));
}

#[tokio::test]
async fn a_key_with_a_rate_limit_of_its_own_spends_its_users_allowance_then_its_own() {
    let key = ApiKey::generate();
    let mut mocks = Mocks::new();
    let limited = Credential {
        settings: KeySettings { rate_limit_per_minute: Some(2), ..KeySettings::default() },
        own_rate_limit_per_minute: Some(2),
        ..credential_for(&key)
    };
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![limited.clone()]));
    let mut order = mockall::Sequence::new();
    mocks
        .rate_limiter
        .expect_acquire()
        .with(eq(RateBucket::user(owner())), eq(7))
        .times(1)
        .in_sequence(&mut order)
        .returning(|_, _| Ok(RateDecision::Allowed));
    let retry_after = Duration::from_secs(30);
    mocks
        .rate_limiter
        .expect_acquire()
        .with(eq(RateBucket::key(&key.prefix())), eq(2))
        .times(1)
        .in_sequence(&mut order)
        .returning(move |_, _| Ok(RateDecision::Limited { retry_after }));
    let refused = mocks.services(Settings::default()).accounts.authenticate(key.expose()).await;
    assert_eq!(refused, Err(AuthError::RateLimited { retry_after }));
    assert_ne!(RateBucket::key(&key.prefix()), RateBucket::user(owner()));
}

#[tokio::test]
async fn a_child_key_spends_the_rate_of_every_ancestor_with_a_limit_and_acts_within_its_subtree() {
    let key = ApiKey::generate();
    let (parent, root, grandchild) = (
        genjobs_domain::ids::KeyPrefix::of("gj_parent"),
        genjobs_domain::ids::KeyPrefix::of("gj_root"),
        genjobs_domain::ids::KeyPrefix::of("gj_below"),
    );
    let mut mocks = Mocks::new();
    let child = Credential {
        settings: KeySettings { rate_limit_per_minute: Some(3), ..KeySettings::default() },
        lineage: KeyLineage {
            ancestors: vec![
                AncestorKey { prefix: parent.clone(), rate_limit_per_minute: None, limits_jobs: false },
                AncestorKey { prefix: root.clone(), rate_limit_per_minute: Some(3), limits_jobs: true },
            ],
            descendants: vec![grandchild.clone()],
        },
        ..credential_for(&key)
    };
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![child.clone()]));
    mocks.accounts.expect_record_key_use().returning(|_, _| Ok(()));
    let mut order = mockall::Sequence::new();
    for (bucket, limit) in [(RateBucket::user(owner()), 7), (RateBucket::key(&root), 3)] {
        mocks
            .rate_limiter
            .expect_acquire()
            .with(eq(bucket), eq(limit))
            .times(1)
            .in_sequence(&mut order)
            .returning(|_, _| Ok(RateDecision::Allowed));
    }
    let caller = mocks.services(Settings::default()).accounts.authenticate(key.expose()).await.unwrap();
    assert!(caller.is_restricted(), "a key with a parent acts within its subtree");
    assert!(caller.sees_key(Some(&key.prefix())) && caller.sees_key(Some(&grandchild)));
    assert!(!caller.sees_key(Some(&parent)) && !caller.sees_key(None), "not its parent's jobs, nor keyless ones");
}

#[tokio::test]
async fn an_expired_key_is_refused_before_its_rate_is_spent() {
    let key = ApiKey::generate();
    let mut mocks = Mocks::new();
    let expired = Credential {
        settings: KeySettings { expires_at: Some(t0()), ..KeySettings::default() },
        ..credential_for(&key)
    };
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![expired.clone()]));
    mocks.rate_limiter.expect_acquire().times(0);
    let refused = mocks.services(Settings::default()).accounts.authenticate(key.expose()).await;
    assert!(matches!(refused, Err(AuthError::KeyExpired(_))), "{refused:?}");
}

#[tokio::test]
async fn a_key_outside_its_models_is_refused_before_the_store_and_a_submission_carries_its_prefix() {
    let key = ApiKey::generate();
    let restricted = |models: &[&str]| Caller {
        key: Some(CallerKey {
            prefix: key.prefix(),
            settings: Arc::new(KeySettings {
                models: Some(models.iter().map(|m| genjobs_domain::ids::ModelId::new(*m)).collect()),
                ..KeySettings::default()
            }),
            subtree: None,
        }),
        ..caller()
    };
    let mut mocks = Mocks::new();
    let prefix = key.prefix();
    mocks
        .jobs
        .expect_accept()
        .withf(move |job, _, _, _| job.key_prefix() == Some(&prefix))
        .times(1)
        .returning(|job, _, _, _| Ok(Accepted::Created(job)));
    let submissions = mocks.services(Settings::default()).submissions;
    let submit = |caller: Caller| {
        let submissions = submissions.clone();
        async move {
            submissions
                .submit(&caller, Submission { request: image_request(), received: received(), idempotency: None })
                .await
        }
    };
    let refused = submit(restricted(&["flux-pro"])).await;
    assert!(matches!(refused, Err(SubmitError::ModelNotAllowed { .. })), "{refused:?}");
    assert!(submit(restricted(&["nano-banana"])).await.is_ok());
}

#[tokio::test]
async fn a_key_with_the_right_prefix_but_wrong_secret_is_invalid_and_costs_no_rate() {
    let key = ApiKey::generate();
    let forged = format!("{}{}", key.prefix(), "0".repeat(20));
    let mut mocks = Mocks::new();
    let stored = credential_for(&key);
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![stored.clone()]));
    mocks.rate_limiter.expect_acquire().times(0);
    assert_eq!(mocks.services(Settings::default()).accounts.authenticate(&forged).await, Err(AuthError::InvalidKey));
}

#[tokio::test]
async fn a_rate_limited_caller_is_told_when_to_retry() {
    let key = ApiKey::generate();
    let mut mocks = Mocks::new();
    let stored = credential_for(&key);
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![stored.clone()]));
    mocks
        .rate_limiter
        .expect_acquire()
        .returning(|_, _| Ok(RateDecision::Limited { retry_after: Duration::from_millis(1500) }));
    let result = mocks.services(Settings::default()).accounts.authenticate(key.expose()).await;
    assert_eq!(result, Err(AuthError::RateLimited { retry_after: Duration::from_millis(1500) }));
}
