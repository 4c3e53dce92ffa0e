//! Credits under races: the ledger stays exact, the database refuses a second final movement, and
//! grouped commits keep each job's compare-and-set.

use super::*;

/// Many tasks over several pooled connections of two "replicas" race accepts, cancels and
/// completions: the limit holds, each job moves its credits once, and the ledger agrees with the
/// account row.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_replicas_keep_the_ledger_exact() {
    let db = crate::database().await;
    let (a, b) = (replica(&db), replica(&db));
    let (id, _) = user(&a.store, 500, 6).await;
    let stores = [a.store.clone(), b.store.clone()];
    let tasks = (0..80).map(|i| {
        let store = stores[i % 2].clone();
        let other = stores[(i + 1) % 2].clone();
        tokio::spawn(async move {
            let job = match store.accept(new_job(id, 9), None, None, OffsetDateTime::now_utc()).await {
                Ok(Accepted::Created(job)) => job,
                Err(AcceptError::ConcurrencyLimit { .. } | AcceptError::InsufficientCredits { .. }) => return,
                other => panic!("{other:?}"),
            };
            let active = store.account(id).await.unwrap().unwrap().active_jobs;
            assert!(active <= 6, "limit exceeded: {active}");
            let (start, sent) = submission();
            let job = advance(&store, job, start).await.unwrap();
            let job = advance(&store, job, sent).await.unwrap();
            let finish =
                if i % 3 == 0 { success(5) } else { Trigger::failed(JobError::new(JobErrorCode::UpstreamFailed, "x")) };
            let (left, right) = (
                job.apply(finish, OffsetDateTime::now_utc()).unwrap(),
                job.apply(Trigger::Cancel, OffsetDateTime::now_utc()).unwrap(),
            );
            let outcomes = join_all([store.commit(left), other.commit(right)]).await;
            let applied = outcomes.iter().filter(|o| matches!(o, Ok(Commit::Applied(_)))).count();
            assert_eq!(applied, 1, "exactly one final transition: {outcomes:?}");
        })
    });
    for task in join_all(tasks).await {
        task.unwrap();
    }
    let account = a.store.account(id).await.unwrap().unwrap();
    assert_eq!((account.active_jobs, account.balances.held), (0, Credits::ZERO));
    assert_eq!(account.balances.total(), 500);
    let totals = a.store.ledger_totals(id).await.unwrap();
    assert_eq!(totals.granted, 500);
    assert_eq!(totals.granted - totals.held + totals.released, account.balances.available.get() as i64);
    assert_eq!(totals.spent, account.balances.spent.get() as i64);
    assert_eq!(totals.held, totals.spent + totals.released, "everything held was settled or released");
}

#[tokio::test]
async fn the_database_refuses_a_second_final_movement_and_negative_balances() {
    let db = crate::database().await;
    let r = replica(&db);
    let (id, _) = user(&r.store, 50, 4).await;
    let Accepted::Created(job) = r.store.accept(new_job(id, 10), None, None, OffsetDateTime::now_utc()).await.unwrap()
    else {
        panic!()
    };
    advance(&r.store, job.clone(), Trigger::Cancel).await.unwrap();
    let mut conn = r.store.pool().get().await.unwrap();
    let second = diesel::sql_query(format!(
        "INSERT INTO ledger (user_id, job_id, kind, amount, released) VALUES ('{}', '{}', 'settle', 10, 0)",
        id,
        job.id()
    ))
    .execute(&mut conn)
    .await;
    assert!(second.is_err(), "one final movement per job");
    let negative = diesel::sql_query(format!(
        "UPDATE users SET credits_available = -1, credits_granted = credits_granted - 51 WHERE id = '{id}'"
    ))
    .execute(&mut conn)
    .await;
    assert!(negative.is_err(), "balances are never negative");
    let unbalanced =
        diesel::sql_query(format!("UPDATE users SET credits_available = credits_available + 1 WHERE id = '{id}'"))
            .execute(&mut conn)
            .await;
    assert!(unbalanced.is_err(), "available + held + spent equals the grants");
}

#[tokio::test]
async fn recomputable_and_durable_commits_both_apply() {
    let db = crate::database().await;
    let settings = db.settings();
    let store = PgStore::new(pool(&settings).unwrap(), Arc::new(KeyCache::new(Duration::ZERO)))
        .with_pooler(settings.pooler)
        .with_relaxed_writes(relaxed_pool(&settings).unwrap());
    let (id, _) = user(&store, 50, 4).await;
    let Accepted::Created(job) = store.accept(new_job(id, 10), None, None, OffsetDateTime::now_utc()).await.unwrap()
    else {
        panic!()
    };
    let (start, sent) = submission();
    let job = advance(&store, job, start).await.unwrap();
    let job = advance(&store, job, sent).await.unwrap();
    let running = Trigger::UpstreamRunning { progress: 30, next_poll_at: OffsetDateTime::now_utc() };
    let job = advance(&store, job, running).await.unwrap();
    assert_eq!(store.job(job.id()).await.unwrap().unwrap().progress(), 30);
    advance(&store, job, success(10)).await.unwrap();
    assert_eq!(store.account(id).await.unwrap().unwrap().balances.spent, Credits::new(10));
}

/// Commits that move no credits are written in groups: many at once all apply, and of two
/// transitions from the same version in one group only one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commits_keep_compare_and_set_per_job() {
    let db = crate::database().await;
    let r = replica(&db);
    let (id, _) = user(&r.store, 1000, 100).await;
    let mut jobs = Vec::new();
    for _ in 0..50 {
        let Accepted::Created(job) =
            r.store.accept(new_job(id, 1), None, None, OffsetDateTime::now_utc()).await.unwrap()
        else {
            panic!()
        };
        jobs.push(job);
    }
    let started = join_all(jobs.iter().map(|job| {
        let transition =
            job.apply(Trigger::SubmitStarted { next_poll_at: OffsetDateTime::now_utc() }, OffsetDateTime::now_utc());
        r.store.commit(transition.unwrap())
    }))
    .await;
    assert!(started.iter().all(|c| matches!(c, Ok(Commit::Applied(_)))), "{started:?}");

    let Ok(Commit::Applied(attempted)) = &started[0] else { panic!() };
    let twins = [1, 2].map(|s| {
        attempted
            .apply(
                Trigger::SubmitNotReached { next_poll_at: OffsetDateTime::now_utc() + time::Duration::seconds(s) },
                OffsetDateTime::now_utc(),
            )
            .unwrap()
    });
    let outcomes = join_all(twins.into_iter().map(|t| r.store.commit(t))).await;
    assert_eq!(outcomes.iter().filter(|o| matches!(o, Ok(Commit::Applied(_)))).count(), 1, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| matches!(o, Ok(Commit::Stale(_)))).count(), 1, "{outcomes:?}");
}
