//! Provider cost, settlement and margins from outside: a route's `cost` is checked as the
//! catalog's other fields are; a job is charged for what it delivered and billed as its provider
//! reports; the operators' job, usage report (JSON and CSV), reconciliation and metrics show
//! what the providers billed, what the credits are worth and the margin.

use genjobs_tests::{ADMIN_TOKEN, TestApp, assert_error, fast_config, sample_sum};
use serde_json::{Value, json};

use crate::{spawn_app, spawn_app_with};

async fn admin_job(app: &TestApp, id: &str) -> Value {
    let response = app.get(&format!("/api/admin/jobs/{id}"), ADMIN_TOKEN).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn finished(app: &TestApp, key: &str, endpoint: &str, body: Value) -> (Value, Value) {
    let receipt = app.submit(endpoint, key, body).await;
    let id = receipt["job_id"].as_str().unwrap().to_owned();
    let job = app.final_unwatched(key, &id).await;
    (job, admin_job(app, &id).await)
}

fn ledger_of(detail: &Value, kind: &str) -> Vec<i64> {
    let entries = detail["ledger"].as_array().unwrap();
    entries.iter().filter(|e| e["kind"] == kind).filter_map(|e| e["credits"].as_i64()).collect()
}

#[tokio::test]
async fn a_routes_cost_is_checked_as_the_catalogs_other_fields_are() {
    let app = spawn_app().await;
    let mut model = app.admin_model("recraft-v3").await;
    for key in ["id", "upstream"] {
        model.as_object_mut().unwrap().remove(key);
    }
    let with_cost = |cost: Value| {
        let mut document = model.clone();
        document["routes"][0]["cost"] = cost;
        document
    };
    let refusals = [
        (json!({"per": "minute", "usd": "0.04"}), "routes[0].cost.per"),
        (json!({"per": "image", "usd": "-0.04"}), "routes[0].cost.usd"),
        (json!({"per": "image", "usd": "four cents"}), "routes[0].cost.usd"),
        (json!({"per": "image", "usd": 0.04}), "routes[0].cost.usd"),
        (json!({"per": "image"}), "routes[0].cost.usd"),
    ];
    for (cost, param) in refusals {
        let response = app.put_model("recraft-v3", &with_cost(cost.clone())).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], param, "{cost}");
    }
    let response = app.put_model("recraft-v3", &with_cost(json!({"per": "megapixel", "usd": "0.035"}))).await;
    assert_eq!(response.status(), 200);
    let shown = app.admin_model("recraft-v3").await;
    assert_eq!(shown["routes"][0]["cost"], json!({"per": "megapixel", "usd": "0.035"}));
}

#[tokio::test]
async fn an_image_job_pays_for_the_images_delivered_and_is_billed_as_its_provider_reports() {
    let app = spawn_app().await;
    let user = app.create_user(1000, json!({})).await;
    let body = json!({"model": "nano-banana", "prompt": "three foxes [sim:deliver=2]", "n": 3});
    let (job, detail) = finished(&app, &user.key, "images", body).await;
    assert_eq!(job["state"], "succeeded");
    assert_eq!((job["credits_held"].as_u64(), job["credits_actual"].as_u64()), (Some(12), Some(8)));
    assert_eq!((ledger_of(&detail, "charge"), ledger_of(&detail, "release")), (vec![8], vec![4]));
    assert_eq!((detail["provider_units"].as_str(), detail["provider_cost_usd"].as_str()), (Some("2"), Some("0.078")));
    let body = json!({"model": "nano-banana", "prompt": "a fox [sim:deliver=1] [sim:billable=3]", "n": 2});
    let (job, detail) = finished(&app, &user.key, "images", body).await;
    assert_eq!(job["credits_actual"].as_u64(), Some(4), "charged for the one image delivered");
    assert_eq!((detail["provider_units"].as_str(), detail["provider_cost_usd"].as_str()), (Some("3"), Some("0.117")));
    let reconciliation: Value =
        app.get("/api/admin/reconciliation?provider=fal", ADMIN_TOKEN).await.json().await.unwrap();
    let mismatches = reconciliation["mismatches"].as_array().unwrap();
    assert_eq!(mismatches.len(), 1, "{reconciliation}");
    assert_eq!(mismatches[0]["job_id"], job["id"]);
    assert_eq!(
        (mismatches[0]["units_charged"].as_str(), mismatches[0]["units_reported"].as_str()),
        (Some("1"), Some("3"))
    );
    let rows = reconciliation["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{reconciliation}");
    assert_eq!((rows[0]["provider"].as_str(), rows[0]["jobs"].as_u64()), (Some("fal"), Some(2)));
    assert_eq!((rows[0]["units"].as_str(), rows[0]["cost_usd"].as_str()), (Some("5"), Some("0.195")));
}

#[tokio::test]
async fn a_video_pays_for_the_seconds_delivered_and_an_unfinished_or_failed_job_costs_nothing() {
    let app = spawn_app().await;
    let user = app.create_user(1000, json!({})).await;
    let body = json!({"model": "seedance-2.0-fast", "prompt": "waves [sim:video-secs=4]", "resolution": "720p", "duration_sec": 8});
    let (job, detail) = finished(&app, &user.key, "video", body).await;
    assert_eq!((job["credits_held"].as_u64(), job["credits_actual"].as_u64()), (Some(32), Some(16)));
    assert_eq!((ledger_of(&detail, "charge"), ledger_of(&detail, "release")), (vec![16], vec![16]));
    assert_eq!((detail["provider_units"].as_str(), detail["provider_cost_usd"].as_str()), (Some("4"), Some("0.144")));
    let (failed, detail) =
        finished(&app, &user.key, "images", json!({"model": "nano-banana", "prompt": "x [sim:fail]"})).await;
    assert_eq!(failed["state"], "failed");
    assert_eq!((detail["provider_units"].as_str(), detail["provider_cost_usd"].as_str()), (Some("0"), Some("0")));
    let hanging = app.submit("images", &user.key, json!({"model": "nano-banana", "prompt": "x [sim:hang]"})).await;
    let detail = admin_job(&app, hanging["job_id"].as_str().unwrap()).await;
    assert!(detail["provider_units"].is_null() && detail["provider_cost_usd"].is_null(), "{detail}");
}

#[tokio::test]
async fn a_failed_job_its_provider_billed_keeps_the_units_and_releases_the_user_in_full() {
    let app = spawn_app().await;
    let user = app.create_user(1000, json!({})).await;
    let body = json!({"model": "nano-banana", "prompt": "x [sim:fail] [sim:billable=2]"});
    let (failed, detail) = finished(&app, &user.key, "images", body).await;
    assert_eq!((failed["state"].as_str(), failed["credits_actual"].as_u64()), (Some("failed"), Some(0)), "{failed}");
    assert_eq!((ledger_of(&detail, "charge"), ledger_of(&detail, "release")), (vec![], vec![4]));
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(1000), Some(0)));
    assert_eq!((detail["provider_units"].as_str(), detail["provider_cost_usd"].as_str()), (Some("2"), Some("0.078")));
    let reconciliation: Value = app.get("/api/admin/reconciliation", ADMIN_TOKEN).await.json().await.unwrap();
    let mismatches = reconciliation["mismatches"].as_array().unwrap();
    assert_eq!(mismatches.len(), 1, "{reconciliation}");
    assert_eq!(mismatches[0]["job_id"], failed["id"]);
    let units = (mismatches[0]["units_charged"].as_str(), mismatches[0]["units_reported"].as_str());
    assert_eq!(units, (Some("0"), Some("2")));
    let rows = reconciliation["data"].as_array().unwrap();
    assert_eq!((rows.len(), rows[0]["jobs"].as_u64(), rows[0]["cost_usd"].as_str()), (1, Some(1), Some("0.078")));
    let usage: Value = app.get("/api/admin/usage?group_by=provider_key", ADMIN_TOKEN).await.json().await.unwrap();
    let row = &usage["data"][0];
    let money = (row["provider_cost_usd"].as_str(), row["revenue_usd"].as_str(), row["margin_usd"].as_str());
    assert_eq!(money, (Some("0.078"), Some("0"), Some("-0.078")), "{usage}");
}

#[tokio::test]
async fn a_failed_prediction_on_a_compute_second_route_keeps_its_predict_time() {
    let sim = super::replicate::replicate_sim();
    let app = spawn_app_with(super::replicate::replicate_only(&sim, false, fast_config())).await;
    let mut model = app.admin_model("flux-pro").await;
    for key in ["id", "upstream"] {
        model.as_object_mut().unwrap().remove(key);
    }
    let routes = model["routes"].as_array_mut().unwrap();
    let replicate = routes.iter_mut().find(|route| route["provider"] == "replicate").unwrap();
    replicate["cost"] = json!({"per": "compute_second", "usd": "0.002"});
    assert_eq!(app.put_model("flux-pro", &model).await.status(), 200);
    let user = app.create_user(100, json!({})).await;
    let body = json!({"model": "flux-pro", "prompt": "a fox [sim:fail]"});
    let (failed, detail) = finished(&app, &user.key, "images", body).await;
    assert_eq!(
        (failed["state"].as_str(), failed["upstream"].as_str()),
        (Some("failed"), Some("replicate")),
        "{failed}"
    );
    assert_eq!(app.user(&user.id).await["credits_available"].as_u64(), Some(100), "released in full");
    // The simulator processes every prediction for 300 ms.
    let bill = (detail["provider_units"].as_str(), detail["provider_cost_usd"].as_str());
    assert_eq!(bill, (Some("0.3"), Some("0.0006")), "{detail}");
}

#[tokio::test]
async fn usage_shows_cost_revenue_and_margin_for_every_grouping_and_in_csv() {
    let app = spawn_app().await;
    let user = app.create_user(1000, json!({})).await;
    finished(&app, &user.key, "images", json!({"model": "nano-banana", "prompt": "a fox", "n": 2})).await;
    for group_by in ["user", "model", "day", "day,model", "provider", "key", "provider_key"] {
        let report: Value =
            app.get(&format!("/api/admin/usage?group_by={group_by}"), ADMIN_TOKEN).await.json().await.unwrap();
        let rows = report["data"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{group_by}: {report}");
        let money =
            (rows[0]["provider_cost_usd"].as_str(), rows[0]["revenue_usd"].as_str(), rows[0]["margin_usd"].as_str());
        assert_eq!(money, (Some("0.078"), Some("0.08"), Some("0.002")), "{group_by}: {report}");
    }
    let by_key: Value = app.get("/api/admin/usage?group_by=provider_key", ADMIN_TOKEN).await.json().await.unwrap();
    assert!(by_key["data"][0].as_object().unwrap().contains_key("provider_key"), "{by_key}");
    let csv = app
        .client
        .get(app.url("/api/admin/usage?group_by=model"))
        .bearer_auth(ADMIN_TOKEN)
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "model,jobs,succeeded,failed,canceled,credits_spent,content_refused,provider_cost_usd,revenue_usd,margin_usd"
        )
    );
    assert_eq!(lines.next(), Some("nano-banana,1,1,0,0,8,0,0.078,0.08,0.002"));
    let own: Value = app.get("/api/v1/account/usage", &user.key).await.json().await.unwrap();
    assert!(own["data"][0].get("provider_cost_usd").is_none(), "users never see what providers bill: {own}");
    let metrics = app.metrics().await;
    let cost = sample_sum(&metrics, "genjobs_provider_cost_usd_total", &["provider=\"fal\"", "model=\"nano-banana\""]);
    // The metrics recorder is the process's, which other tests' jobs add to as well.
    assert!(cost >= 0.078 - 1e-9, "{cost}");
}

#[tokio::test]
async fn a_bad_reconciliation_query_is_refused_naming_its_param() {
    let app = spawn_app().await;
    for (query, param) in [
        ("from=2026-11-20&to=2026-11-10", "to"),
        ("from=yesterday", "from"),
        ("to=2026-13-01", "to"),
        ("provider=nobody", "provider"),
    ] {
        let response = app.get(&format!("/api/admin/reconciliation?{query}"), ADMIN_TOKEN).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], param, "{query}");
    }
    let empty: Value = app.get("/api/admin/reconciliation", ADMIN_TOKEN).await.json().await.unwrap();
    assert_eq!(empty, json!({"data": [], "mismatches": []}));
    let as_user = app.create_user(1, json!({})).await;
    assert_eq!(app.get("/api/admin/reconciliation", &as_user.key).await.status(), 401);
}
