//! The operators' console: each page's main action done through the page, its effect checked
//! through the admin API. Users and keys (create, find, grant, tier, a restricted key, revoke),
//! the catalog (an edit saved, a fault shown at its field, the price preview), usage (the chart
//! and the CSV), jobs (filtered, a job's ledger and webhook deliveries, a cancel), batches (their
//! counts, a batch's items) and providers.

use std::time::Duration;

use fantoccini::{Client, Locator};
use genjobs::Config;
use genjobs_tests::{ADMIN_TOKEN, TestApp, fast_config, spawn_app_with};
use serde_json::{Value, json};

use crate::{browser, chromedriver, screenshot, until};

async fn sign_in(page: &Client, app: &TestApp, hash: &str) {
    page.goto(&app.url(&format!("/console{hash}"))).await.unwrap();
    page.execute("document.getElementById('admin-token').value = arguments[0];", vec![json!(ADMIN_TOKEN)])
        .await
        .unwrap();
    page.find(Locator::Id("save-token")).await.unwrap().click().await.unwrap();
}

/// Sets the named inputs of form `form` and submits it.
async fn fill_and_submit(page: &Client, form: &str, values: Value) {
    let script = "const form = document.getElementById(arguments[0]);
        for (const [name, value] of Object.entries(arguments[1])) form.elements[name].value = value;
        form.requestSubmit();";
    page.execute(script, vec![json!(form), values]).await.unwrap();
}

async fn admin(app: &TestApp, path: &str) -> Value {
    app.get(path, ADMIN_TOKEN).await.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_loads_without_a_token_and_asks_for_one() {
    let app = spawn_app_with(fast_config()).await;
    let response = app.client.get(app.url("/console")).send().await.unwrap();
    assert_eq!(response.status(), 200, "no redirect, no token");
    let policy = response.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let html = response.text().await.unwrap();
    assert!(html.contains("genjobs console"));
    let references: Vec<&str> =
        html.split(['"', '\'']).filter(|s| s.ends_with(".js") || s.ends_with(".css") || s.contains("://")).collect();
    assert!(
        !references.is_empty() && references.iter().all(|r| r.starts_with('/')),
        "nothing from elsewhere: {references:?}"
    );
    for own in ["/playground/console.js", "/playground/spending-chart.js"] {
        let script = app.client.get(app.url(own)).send().await.unwrap();
        assert_eq!(script.headers()["cache-control"], "no-cache", "{own} is not kept a day beside a newer page");
    }

    let driver = chromedriver().await;
    let page = browser(&driver).await;
    page.goto(&app.url("/console")).await.unwrap();
    let asked = until(&page, "the sign-in prompt", "return document.getElementById('error').textContent;").await;
    assert_eq!(asked, "Sign in with the admin token.");
    page.execute("document.getElementById('admin-token').value = 'not-the-token-but-long-enough-to-try';", vec![])
        .await
        .unwrap();
    page.find(Locator::Id("save-token")).await.unwrap().click().await.unwrap();
    let refused = until(&page, "the refusal", "return document.getElementById('error').textContent;").await;
    assert_ne!(refused, "Sign in with the admin token.", "a wrong token is refused by the API: {refused}");
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_page_creates_finds_grants_tiers_issues_and_revokes() {
    let app = spawn_app_with(fast_config()).await;
    let driver = chromedriver().await;
    let page = browser(&driver).await;
    sign_in(&page, &app, "#users").await;

    fill_and_submit(
        &page,
        "create-user",
        json!({"name": "console-made", "credits": "40", "rate_limit_per_minute": "90", "price_percent": "150"}),
    )
    .await;
    let shown = until(&page, "the new key", "return document.getElementById('new-key').dataset.userId;").await;
    let user_id = shown.as_str().unwrap().to_owned();
    let user = admin(&app, &format!("/api/admin/users/{user_id}")).await;
    assert_eq!((user["name"].as_str(), user["credits_available"].as_u64()), (Some("console-made"), Some(40)));
    assert_eq!(user["rate_limit_per_minute"], 90);
    let key_text = page.find(Locator::Id("new-key")).await.unwrap().text().await.unwrap();
    let key = key_text.rsplit(' ').next().unwrap().to_owned();
    assert_eq!(app.get("/api/v1/account", &key).await.status(), 200, "the key shown works: {key_text}");

    fill_and_submit(&page, "user-search", json!({"user-query": "console-m"})).await;
    let found = format!("return document.querySelector('#users tr[data-id=\"{user_id}\"]');");
    until(&page, "the user found by its name's beginning", &found).await;
    page.find(Locator::Css(&format!("#users tr[data-id=\"{user_id}\"]"))).await.unwrap().click().await.unwrap();
    until(&page, "the user's page", "return document.getElementById('user-available').textContent === '40';").await;

    fill_and_submit(&page, "grant", json!({"amount": "25"})).await;
    until(&page, "the grant", "return document.getElementById('user-available').textContent === '65';").await;
    assert_eq!(admin(&app, &format!("/api/admin/users/{user_id}")).await["credits_available"], 65);

    fill_and_submit(&page, "user-limits", json!({"price_percent": "200"})).await;
    let tiered = async || admin(&app, "/api/admin/users?q=console-made").await["data"][0]["price_percent"].clone();
    assert!(genjobs_test_wait::eventually(Duration::from_secs(10), async || tiered().await == 200).await);

    fill_and_submit(
        &page,
        "issue-key",
        json!({"name": "ci", "models": "flux-pro", "budget_credits": "30", "budget_period": "day"}),
    )
    .await;
    let issued = until(&page, "the issued key", "return document.getElementById('issued-key').textContent;").await;
    let restricted = issued.as_str().unwrap().rsplit(' ').next().unwrap().to_owned();
    let keys = admin(&app, &format!("/api/admin/users/{user_id}/keys")).await;
    let made = keys["data"].as_array().unwrap().iter().find(|k| k["name"] == "ci").unwrap().clone();
    assert_eq!(made["models"], json!(["flux-pro"]));
    assert_eq!((made["budget"]["credits"].as_u64(), made["budget"]["period"].as_str()), (Some(30), Some("day")));
    let listed =
        format!("return document.querySelector('#keys tr[data-prefix=\"{}\"]');", made["prefix"].as_str().unwrap());
    until(&page, "the key in the list", &listed).await;
    screenshot(&page, "console-users").await;

    page.execute(
        "document.querySelector(`#keys tr[data-prefix=\"${arguments[0]}\"] button`).click();",
        vec![made["prefix"].clone()],
    )
    .await
    .unwrap();
    let revoked = async || app.get("/api/v1/account", &restricted).await.status() == 401;
    assert!(genjobs_test_wait::eventually(Duration::from_secs(10), revoked).await, "the revoked key stops working");
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_page_saves_an_edit_shows_a_fault_at_its_field_and_previews_the_price() {
    let app = spawn_app_with(fast_config()).await;
    let price = app.admin_model("flux-pro").await["price"]["credits"].as_u64().unwrap();
    let driver = chromedriver().await;
    let page = browser(&driver).await;
    sign_in(&page, &app, "#catalog").await;
    until(&page, "the models", "return document.querySelector('#models tr[data-id=\"flux-pro\"]');").await;
    page.find(Locator::Css("#models tr[data-id=\"flux-pro\"]")).await.unwrap().click().await.unwrap();
    until(
        &page,
        "the model's fields",
        "return document.querySelector('#model-fields input[data-path=\"price.credits\"]');",
    )
    .await;

    let set = "const input = document.querySelector(`#model-fields input[data-path=\"${arguments[0]}\"]`);
        input.value = arguments[1]; input.dispatchEvent(new Event('input'));";
    page.execute(set, vec![json!("price.credits"), json!((price + 3).to_string())]).await.unwrap();
    page.execute("const n = document.getElementById('preview').elements.n; n.value = '3'; n.dispatchEvent(new Event('input', {bubbles: true}));", vec![])
        .await
        .unwrap();
    let previewed =
        until(&page, "the preview", "return document.getElementById('preview-credits').dataset.credits;").await;
    assert_eq!(previewed, (3 * (price + 3)).to_string(), "three images at the edited price");
    page.find(Locator::Id("save-model")).await.unwrap().click().await.unwrap();
    until(&page, "the save", "return document.getElementById('model-saved').textContent === 'Saved.';").await;
    assert_eq!(app.admin_model("flux-pro").await["price"]["credits"], price + 3, "the edit reached the catalog");
    let user = app.create_user(100, json!({})).await;
    let quote: Value = app
        .post("/api/v1/images/generations/quote", &user.key, &json!({"model": "flux-pro", "prompt": "x", "n": 3}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(quote["credits"].to_string(), previewed.as_str().unwrap(), "the preview is what a quote says");

    page.execute(set, vec![json!("routes[0].endpoint"), json!("fal-ai/no-such-endpoint")]).await.unwrap();
    page.find(Locator::Id("save-model")).await.unwrap().click().await.unwrap();
    let fault = until(
        &page,
        "the fault at its field",
        "const e = document.querySelector('#model-fields .field-error'); \
         return e && [e.dataset.param, e.parentElement.querySelector('input').dataset.path, \
                      e.parentElement.querySelector('input').classList.contains('invalid')];",
    )
    .await;
    assert_eq!(fault, json!(["routes[0].endpoint", "routes[0].endpoint", true]));
    page.execute(set, vec![json!("price.credits"), json!("-3")]).await.unwrap();
    page.find(Locator::Id("save-model")).await.unwrap().click().await.unwrap();
    let worded = until(
        &page,
        "the fault in words",
        "const e = document.querySelector('#model-fields .field-error[data-param=\"price.credits\"]'); return e && e.textContent;",
    )
    .await;
    assert_eq!(worded, "`price.credits` must be a whole number (0 or more); got -3");
    screenshot(&page, "console-catalog").await;
    assert_eq!(app.admin_model("flux-pro").await["price"]["credits"], price + 3, "a refused edit changes nothing");
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_page_charts_spending_and_downloads_the_csv() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(100, json!({})).await;
    for body in [json!({"prompt": "a fox", "n": 2}), json!({"model": "flux-pro", "prompt": "a hen"})] {
        let receipt = app.submit("images", &user.key, body).await;
        assert_eq!(app.wait_final(&user.key, receipt["job_id"].as_str().unwrap()).await["state"], "succeeded");
    }
    let driver = chromedriver().await;
    let page = browser(&driver).await;
    sign_in(&page, &app, "#usage").await;
    let models = until(&page, "the chart", "return document.getElementById('usage-chart').dataset.models;").await;
    assert_eq!(models, "flux-pro,nano-banana");
    assert!(page.find(Locator::Css("#usage-chart canvas")).await.is_ok(), "uPlot drew its canvas");
    let by_model = page
        .execute(
            "return [...document.querySelectorAll('#usage-by-model tbody tr')].map(r => [r.cells[0].textContent, Number(r.cells[5].textContent), r.cells[6].textContent, r.cells[7].textContent]);",
            vec![],
        )
        .await
        .unwrap();
    let report = admin(&app, "/api/admin/usage?group_by=model").await;
    let expected: Vec<Value> = report["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!([r["model"], r["credits_spent"], r["provider_cost_usd"], r["margin_usd"]]))
        .collect();
    assert_eq!(by_model, json!(expected), "the table is the API's report, cost and margin beside spend");
    let by_user = until(
        &page,
        "the users by name",
        "const c = document.querySelector('#usage-by-user tbody tr td'); \
         return c && [c.firstChild.firstChild.textContent, c.querySelector('small') && c.querySelector('small').textContent.trim()];",
    )
    .await;
    let name = admin(&app, &format!("/api/admin/users/{}", user.id)).await["name"].clone();
    assert_eq!(by_user, json!([name, user.id]), "a user by name, the id beside it");
    screenshot(&page, "console-usage").await;

    page.find(Locator::Id("usage-csv")).await.unwrap().click().await.unwrap();
    let csv = until(&page, "the CSV", "return document.getElementById('usage-csv').dataset.downloaded;").await;
    let csv = csv.as_str().unwrap();
    assert!(csv.starts_with("day,model,jobs,succeeded,failed,canceled,credits_spent"), "{csv}");
    assert!(csv.contains("flux-pro") && csv.contains("nano-banana"), "{csv}");
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobs_page_filters_shows_a_jobs_ledger_and_cancels_it() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(100, json!({})).await;
    let done = app.submit("images", &user.key, json!({"model": "flux-pro", "prompt": "a pear"})).await;
    app.wait_final(&user.key, done["job_id"].as_str().unwrap()).await;
    let hanging = app.submit("images", &user.key, json!({"prompt": "stuck [sim:hang]"})).await;
    let hanging_id = hanging["job_id"].as_str().unwrap().to_owned();

    let driver = chromedriver().await;
    let page = browser(&driver).await;
    sign_in(&page, &app, "#jobs").await;
    fill_and_submit(&page, "job-filters", json!({"user_id": user.id, "model": "flux-pro"})).await;
    let shown = until(
        &page,
        "the filtered jobs",
        "if (!(document.getElementById('jobs').dataset.filters || '').includes('model=flux-pro')) return false; \
         return [...document.querySelectorAll('#jobs tr')].map(r => r.dataset.id);",
    )
    .await;
    assert_eq!(shown, json!([done["job_id"]]), "only the user's flux-pro job");
    screenshot(&page, "console-jobs").await;

    page.goto(&app.url(&format!("/console#job/{hanging_id}"))).await.unwrap();
    until(&page, "the job", &format!("return document.getElementById('job-id').textContent === '{hanging_id}';")).await;
    let kinds = until(
        &page,
        "the job's ledger",
        "const k = [...document.querySelectorAll('#job-ledger tr')].map(r => r.cells[1].textContent); return k.length && k;",
    )
    .await;
    assert_eq!(kinds, json!(["hold"]));
    page.find(Locator::Id("cancel-job")).await.unwrap().click().await.unwrap();
    until(&page, "the canceled state", "return document.getElementById('job-state').textContent === 'canceled';").await;
    let job = admin(&app, &format!("/api/admin/jobs/{hanging_id}")).await;
    assert_eq!(job["state"], "canceled");
    let kinds: Vec<&str> = job["ledger"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["hold", "release"], "the cancel refunded the hold");
    let rows = page.execute("return document.querySelectorAll('#job-ledger tr').length;", vec![]).await.unwrap();
    assert_eq!(rows, 2, "the page shows the release");
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batches_page_lists_a_batchs_counts_and_shows_its_items() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(1_000, json!({})).await;
    let items: Vec<Value> = ["a pear", "a plum [sim:fail]", "a fig"]
        .iter()
        .enumerate()
        .map(|(i, prompt)| json!({"custom_id": format!("sku-{i}"), "modality": "image", "body": {"prompt": prompt}}))
        .collect();
    let response = app.post("/api/v1/batches", &user.key, &json!({ "items": items })).await;
    assert_eq!(response.status(), 202);
    let batch: Value = response.json().await.unwrap();
    let id = batch["id"].as_str().unwrap().to_owned();
    let ended = async || admin(&app, &format!("/api/admin/batches/{id}")).await;
    genjobs_test_wait::wait_until(Duration::from_secs(20), "the batch's end", ended, |b| b["state"] == "completed")
        .await;

    let driver = chromedriver().await;
    let page = browser(&driver).await;
    sign_in(&page, &app, "#batches").await;
    fill_and_submit(&page, "batch-filters", json!({"user_id": user.id})).await;
    let listed = until(
        &page,
        "the user's batches",
        "if (!(document.getElementById('batches').dataset.filters || '').includes('user_id=')) return false; \
         return [...document.querySelectorAll('#batches tr')].map(r => [...r.cells].map(c => c.textContent));",
    )
    .await;
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    let row: Vec<&str> = rows[0].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!((row[1], row[2], row[3]), (id.as_str(), user.id.as_str(), "completed"));
    assert_eq!(
        row[4..10],
        ["3", "0", "0", "2", "1", "0"],
        "items: total, queued, running, succeeded, failed, canceled"
    );
    screenshot(&page, "console-batches").await;

    page.find(Locator::Css("#batches tr.pick")).await.unwrap().click().await.unwrap();
    until(&page, "the batch", &format!("return document.getElementById('batch-id').textContent === '{id}';")).await;
    let shown = until(
        &page,
        "the batch's items",
        "const rows = [...document.querySelectorAll('#batch-items tr')]; \
         return rows.length === 3 && rows.map(r => [r.dataset.customId, r.cells[2].textContent]);",
    )
    .await;
    assert_eq!(shown, json!([["sku-0", "succeeded"], ["sku-1", "failed"], ["sku-2", "succeeded"]]));
    let counts = page
        .execute("return JSON.parse(document.getElementById('batch-counts').dataset.counts);", vec![])
        .await
        .unwrap();
    assert_eq!((counts["total"].as_u64(), counts["failed"].as_u64()), (Some(3), Some(1)));
    let first_job = admin(&app, &format!("/api/admin/batches/{id}/items?limit=1")).await;
    let first_job = first_job["data"][0]["job"]["id"].as_str().unwrap().to_owned();
    page.find(Locator::Css("#batch-items tr.pick")).await.unwrap().click().await.unwrap();
    until(&page, "the item's job", &format!("return document.getElementById('job-id').textContent === '{first_job}';"))
        .await;
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_page_shows_breakers_keys_in_flight_and_the_jobs_waiting() {
    let config = Config {
        upstream_key: Some("first-key-aaaa,second-key-bbbb".into()),
        upstream_max_in_flight: 1,
        ..fast_config()
    };
    let app = spawn_app_with(config).await;
    let user = app.create_user(100, json!({"max_concurrent_jobs": 10})).await;
    let mut jobs = Vec::new();
    for prompt in ["one [sim:hang]", "two [sim:hang]", "three [sim:hang]"] {
        jobs.push(
            app.submit("images", &user.key, json!({"prompt": prompt})).await["job_id"].as_str().unwrap().to_owned(),
        );
    }
    let waiting = async || admin(&app, "/api/admin/providers").await["data"][0]["waiting"]["normal"] == 1;
    assert!(genjobs_test_wait::eventually(Duration::from_secs(10), waiting).await, "two sent, one waits");

    let driver = chromedriver().await;
    let page = browser(&driver).await;
    sign_in(&page, &app, "#providers").await;
    let shown = until(
        &page,
        "the keys",
        "const rows = [...document.querySelectorAll('#providers tr[data-provider=\"fal\"]')]; \
         return rows.length === 2 && rows.map(r => [...r.cells].map(c => c.textContent));",
    )
    .await;
    assert_eq!(
        shown,
        json!([["fal", "closed", "…aaaa", "1", "1", "1 / 0"], ["", "", "…bbbb", "1", "1", ""]]),
        "each key's jobs in flight against its cap, and the job waiting"
    );
    screenshot(&page, "console-providers").await;
    page.close().await.unwrap();
    for job in jobs {
        app.post(&format!("/api/v1/jobs/{job}/cancel"), &user.key, &json!({})).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_page_says_a_provider_without_keys_takes_no_slots() {
    let app = spawn_app_with(fast_config()).await;
    let driver = chromedriver().await;
    let page = browser(&driver).await;
    sign_in(&page, &app, "#providers").await;
    let shown = until(
        &page,
        "the simulator's row",
        "const row = document.querySelector('#providers tr[data-provider=\"fal\"]'); \
         return row && [...row.cells].map(c => c.textContent);",
    )
    .await;
    assert_eq!(
        shown,
        json!(["fal", "closed", "one key or none (e.g. the built-in simulator)", "not counted", "no cap", "0 / 0"])
    );
    page.close().await.unwrap();
}
