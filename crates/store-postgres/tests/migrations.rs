//! Migrations that rewrite stored data, run over rows in the shape the migration before them
//! left: what a deployed database holds when it upgrades.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use genjobs_domain::job::{Trigger, UpstreamRef};
use genjobs_domain::ports::{JobStore, SEAL_AFTER, UsageGrouping, UsageQuery, UsageStore, hour_start};
use genjobs_store_contract::cases::{accepted, now, step, submitted, success, user};
use genjobs_store_postgres::connect;
use genjobs_test_postgres::TestDatabase;
use genjobs_upstream_fal::FalRef;

const TYPED_UPSTREAM: &str = include_str!("../../../migrations/2026-11-25-400000_typed_upstream/up.sql");
const SEALED_HOURS_UP: &str = include_str!("../../../migrations/2026-12-04-100000_usage_sealed_hours/up.sql");
const SEALED_HOURS_DOWN: &str = include_str!("../../../migrations/2026-12-04-100000_usage_sealed_hours/down.sql");

/// fal's references, kept before as a jsonb string of the adapter's JSON (or, earlier, as that
/// object), read back after the migration as typed references that the fal adapter reads.
#[tokio::test]
async fn fal_references_kept_as_json_text_become_typed_references() {
    let db = TestDatabase::new().await;
    let adapters = connect(&db.settings()).unwrap();
    let store = adapters.store.clone();
    let user = user(&*store, 100).await;
    let fal = |id: &str| FalRef {
        endpoint: "fal-ai/flux-pro".into(),
        request_id: id.into(),
        status_url: format!("https://queue.fal.run/fal-ai/flux-pro/requests/{id}/status"),
        response_url: format!("https://queue.fal.run/fal-ai/flux-pro/requests/{id}"),
        cancel_url: format!("https://queue.fal.run/fal-ai/flux-pro/requests/{id}/cancel"),
    };
    let mut jobs = Vec::new();
    for id in ["as-text", "as-object"] {
        let job = accepted(&*store, user, 1).await;
        let started = step(&*store, &job, Trigger::SubmitStarted { next_poll_at: now() }).await;
        jobs.push(
            step(
                &*store,
                &started,
                Trigger::Submitted { upstream: fal(id).to_upstream(), next_poll_at: now(), billing: None },
            )
            .await,
        );
    }
    let mut conn = AsyncPgConnection::establish(&db.url).await.unwrap();
    let old_text = serde_json::json!({
        "endpoint": "fal-ai/flux-pro",
        "request_id": "as-text",
        "status_url": "https://queue.fal.run/fal-ai/flux-pro/requests/as-text/status",
        "response_url": "https://queue.fal.run/fal-ai/flux-pro/requests/as-text",
        "cancel_url": "https://queue.fal.run/fal-ai/flux-pro/requests/as-text/cancel",
    });
    let old_object = serde_json::json!({
        "endpoint": "fal-ai/flux-pro",
        "request_id": "as-object",
        "status_url": "https://queue.fal.run/fal-ai/flux-pro/requests/as-object/status",
        "response_url": "https://queue.fal.run/fal-ai/flux-pro/requests/as-object",
        "cancel_url": "https://queue.fal.run/fal-ai/flux-pro/requests/as-object/cancel",
    });
    for (job, old) in jobs.iter().zip([serde_json::Value::String(old_text.to_string()), old_object]) {
        diesel::sql_query("UPDATE jobs SET upstream = $1, upstream_key = NULL WHERE id = $2")
            .bind::<diesel::sql_types::Jsonb, _>(old)
            .bind::<diesel::sql_types::Uuid, _>(job.id().as_uuid())
            .execute(&mut conn)
            .await
            .unwrap();
    }

    diesel::sql_query(TYPED_UPSTREAM).execute(&mut conn).await.unwrap();

    for (job, id) in jobs.iter().zip(["as-text", "as-object"]) {
        let read = store.job(job.id()).await.unwrap().expect("the job is still there");
        let upstream: &UpstreamRef = read.upstream().expect("its reference survives");
        assert_eq!((upstream.provider(), upstream.key()), ("fal", id));
        assert_eq!(FalRef::from_upstream(upstream), Ok(fal(id)), "the fal adapter reads it as it wrote it");
        let found = store.job_by_upstream_key(id).await.unwrap().map(|found| found.id());
        assert_eq!(found, Some(job.id()), "fal's webhooks find it by the request id");
    }
    diesel::sql_query(TYPED_UPSTREAM).execute(&mut conn).await.unwrap();
    let again = store.job(jobs[0].id()).await.unwrap().unwrap();
    assert_eq!(again.upstream(), Some(&fal("as-text").to_upstream()), "running it twice changes nothing");
}

/// Each migration's version (its folder's name before the first `_`) is its own: the migration
/// runner keeps one row per version, so a second folder of the same version would never run.
#[test]
fn every_migration_has_a_version_of_its_own() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut versions: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.') && name != "README.md")
        .map(|name| name.split('_').next().unwrap_or_default().to_owned())
        .collect();
    let all = versions.len();
    versions.sort();
    versions.dedup();
    assert_eq!(versions.len(), all, "two migrations share a version: {versions:?}");
}

/// Hours sealed of today, taken back to whole days by the down migration (the last day sealed
/// is yesterday, and the rollups no longer count today's jobs still kept) and forward again (the
/// first instant not sealed is today's midnight): every report reads the same throughout.
#[tokio::test]
async fn hours_sealed_go_back_to_whole_days_and_forward_counting_each_job_once() {
    let db = TestDatabase::new().await;
    let adapters = connect(&db.settings()).unwrap();
    let store = adapters.store.clone();
    let owner = user(&*store, 100).await;
    step(&*store, &submitted(&*store, &accepted(&*store, owner, 20).await).await, success(15)).await;
    step(&*store, &accepted(&*store, owner, 5).await, Trigger::Cancel).await;
    let day = now().date();
    let report = async || {
        let query = UsageQuery { user_id: None, keys: None, from: day, to: day, group_by: UsageGrouping::Model };
        store.usage(query).await.unwrap()
    };
    let before = report().await;
    let next_hour = hour_start(now()) + time::Duration::hours(1);
    assert_eq!(store.seal_usage(next_hour + SEAL_AFTER).await.unwrap(), Some(next_hour));
    assert_eq!(report().await, before);
    let mut conn = AsyncPgConnection::establish(&db.url).await.unwrap();
    let today_in_rollup = "SELECT coalesce(sum(jobs), 0)::int8 AS n FROM usage_rollup WHERE day = $1
        UNION ALL SELECT coalesce(sum(jobs), 0)::int8 FROM usage_key_rollup WHERE day = $1";
    let counted = async |conn: &mut AsyncPgConnection| {
        let rows: Vec<Count> =
            diesel::sql_query(today_in_rollup).bind::<diesel::sql_types::Date, _>(day).load(conn).await.unwrap();
        rows.iter().map(|row| row.n).collect::<Vec<_>>()
    };
    assert_eq!(counted(&mut conn).await, [2, 2], "today's hours sealed into both rollups");

    conn.batch_execute(SEALED_HOURS_DOWN).await.unwrap();
    // Sealed up to the next midnight (run in the day's last hour), today is a whole day sealed.
    let kept = if next_hour.date() == day { 0 } else { 2 };
    assert_eq!(counted(&mut conn).await, [kept, kept], "today not sealed, its jobs count from the jobs alone");
    conn.batch_execute(SEALED_HOURS_UP).await.unwrap();
    assert_eq!(report().await, before, "each job counted once");
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}
