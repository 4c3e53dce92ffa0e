//! The playground and the account page: every model's form drawn as the models endpoint
//! describes it, an image job run to its pictures with the progress bar moving, a video job
//! canceled with its refund shown, a 402 explained, the price before submitting, the account's
//! balance, ledger and chart, and a job's webhook deliveries.

use std::time::Duration;

use fantoccini::{Client, Locator};
use genjobs_test_wait::wait_until;
use genjobs_tests::{fast_config, spawn_app_with};
use serde_json::{Value, json};

use crate::{browser, chromedriver, screenshot, until};

async fn choose(page: &Client, select: &str, value: &str) {
    let script = "const s = document.getElementById(arguments[0]); s.value = arguments[1]; \
                  s.dispatchEvent(new Event('change')); return s.value;";
    let chosen = page.execute(script, vec![json!(select), json!(value)]).await.unwrap();
    assert_eq!(chosen, value, "#{select} has no option {value}");
}

async fn use_key(page: &Client, key: &str) {
    page.execute("document.getElementById('api-key').value = arguments[0];", vec![json!(key)]).await.unwrap();
    page.find(Locator::Id("save-key")).await.unwrap().click().await.unwrap();
    until(page, "the models", "return document.getElementById('model').options.length;").await;
}

async fn set_prompt(page: &Client, prompt: &str) {
    page.execute("document.getElementById('field-prompt').value = arguments[0];", vec![json!(prompt)]).await.unwrap();
}

async fn available(page: &Client) -> u64 {
    let shown = until(page, "the balance", "return document.getElementById('balance').dataset.available;").await;
    shown.as_str().unwrap().parse().unwrap()
}

/// The controls drawn for the selected model, as the test compares them with the API's fields.
const FORM: &str = "return [...document.querySelectorAll('#form [name]')].map(e => ({
    name: e.name, tag: e.tagName.toLowerCase(), type: e.type, kind: e.dataset.kind,
    min: e.min || null, max: e.max || null, value: e.value,
    options: e.tagName === 'SELECT' ? [...e.options].map(o => o.value).filter(v => v !== '') : null }));";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_draws_every_form_runs_a_job_cancels_one_and_explains_a_402() {
    let mut config = fast_config().with_poll_interval(Duration::from_millis(100));
    config.simulator.run = Duration::from_millis(1800);
    let app = spawn_app_with(config).await;
    let driver = chromedriver().await;
    let page = browser(&driver).await;
    page.goto(&app.url("/playground")).await.unwrap();
    use_key(&page, &app.demo_key).await;

    for modality in ["image", "video"] {
        choose(&page, "modality", modality).await;
        let listing: Value =
            app.get(&format!("/api/v1/models?modality={modality}"), &app.demo_key).await.json().await.unwrap();
        for model in listing["data"].as_array().unwrap() {
            let id = model["id"].as_str().unwrap();
            until(
                &page,
                "the model list",
                &format!("return [...document.getElementById('model').options].some(o => o.value === '{id}');"),
            )
            .await;
            choose(&page, "model", id).await;
            let drawn = page.execute(FORM, vec![]).await.unwrap();
            let drawn = drawn.as_array().unwrap();
            let fields = model["fields"].as_array().unwrap();
            assert_eq!(drawn.len(), fields.len().max(1), "{id}: {drawn:?}");
            for (field, control) in fields.iter().zip(drawn) {
                assert_eq!(control["name"], field["name"], "{id}");
                let expected = match field["kind"].as_str().unwrap() {
                    "textarea" => ("textarea", "textarea"),
                    "select" => ("select", "select-one"),
                    "number" => ("input", "number"),
                    "image-url" => ("input", "url"),
                    _ => ("input", "text"),
                };
                assert_eq!(
                    (control["tag"].as_str().unwrap(), control["type"].as_str().unwrap()),
                    expected,
                    "{id} {field}"
                );
                if let Some(options) = field["options"].as_array() {
                    let values: Vec<&str> = options.iter().map(|o| o["value"].as_str().unwrap()).collect();
                    let drawn: Vec<&str> =
                        control["options"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
                    assert_eq!(drawn, values, "{id} {field}");
                }
                if let Some(default) = field.get("default").filter(|d| !d.is_null()) {
                    let shown = default.as_str().map_or_else(|| default.to_string(), str::to_owned);
                    assert_eq!(control["value"], shown.as_str(), "{id}: the default is preselected");
                }
                for bound in ["min", "max"] {
                    if let Some(limit) = field[bound].as_f64() {
                        assert_eq!(
                            control[bound].as_str().and_then(|v| v.parse::<f64>().ok()),
                            Some(limit),
                            "{id} {bound}"
                        );
                    }
                }
            }
        }
    }

    choose(&page, "modality", "image").await;
    until(&page, "flux-pro", "return [...document.getElementById('model').options].some(o => o.value === 'flux-pro');")
        .await;
    choose(&page, "model", "flux-pro").await;
    set_prompt(&page, "a lighthouse at dusk").await;
    page.find(Locator::Id("submit")).await.unwrap().click().await.unwrap();
    let mut seen = Vec::new();
    let state_and_progress = async || {
        let script =
            "return [document.getElementById('state').textContent, document.getElementById('progress').value];";
        let state = page.execute(script, vec![]).await.unwrap();
        seen.push(state[1].as_f64().unwrap());
        state
    };
    wait_until(Duration::from_secs(30), "the job's success", state_and_progress, |state| state[0] == "succeeded").await;
    assert!(seen.iter().any(|p| *p > 0.0 && *p < 100.0), "the progress bar moved: {seen:?}");
    let width = until(
        &page,
        "the image",
        "const i = document.querySelector('#outputs img'); return i && i.complete && i.naturalWidth;",
    )
    .await;
    assert_eq!(width, 1024, "the picture loaded at its size");
    screenshot(&page, "playground").await;

    choose(&page, "modality", "video").await;
    until(&page, "the video models", "return document.getElementById('field-prompt') && document.getElementById('model').value.includes('seedance');").await;
    let before = available(&page).await;
    set_prompt(&page, "waves on a rock [sim:hang]").await;
    page.find(Locator::Id("submit")).await.unwrap().click().await.unwrap();
    until(&page, "a cancel button", "return !document.getElementById('cancel').disabled;").await;
    let held = format!("return Number(document.getElementById('balance').dataset.available) < {before};");
    until(&page, "the credits held while it runs", &held).await;
    page.find(Locator::Id("cancel")).await.unwrap().click().await.unwrap();
    until(&page, "the canceled state", "return document.getElementById('state').textContent === 'canceled';").await;
    let refunded = format!("return document.getElementById('balance').dataset.available === '{before}';");
    until(&page, "the refund", &refunded).await;

    let poor = app.create_user(0, json!({"name": "poor"})).await;
    use_key(&page, &poor.key).await;
    choose(&page, "modality", "image").await;
    until(&page, "the form", "return document.getElementById('field-prompt');").await;
    set_prompt(&page, "anything").await;
    page.find(Locator::Id("submit")).await.unwrap().click().await.unwrap();
    let message = until(&page, "the 402 message", "return document.getElementById('error').textContent;").await;
    assert!(message.as_str().unwrap().contains("Not enough credits"), "{message}");
    page.close().await.unwrap();
}

/// The price shows before anything is submitted, and follows the form: three images cost three
/// times one. Nothing is held or made by asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_shows_the_price_before_submitting_and_follows_n() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(100, json!({})).await;
    let driver = chromedriver().await;
    let page = browser(&driver).await;
    page.goto(&app.url("/playground")).await.unwrap();
    use_key(&page, &user.key).await;
    choose(&page, "modality", "image").await;
    until(&page, "flux-pro", "return [...document.getElementById('model').options].some(o => o.value === 'flux-pro');")
        .await;
    choose(&page, "model", "flux-pro").await;
    until(&page, "the quote for one", "return document.getElementById('quote').dataset.credits === '6';").await;
    page.execute(
        "const n = document.getElementById('field-n'); n.value = '3'; n.dispatchEvent(new Event('input', {bubbles: true}));",
        vec![],
    )
    .await
    .unwrap();
    until(&page, "the quote for three", "return document.getElementById('quote').dataset.credits === '18';").await;
    let shown = page.execute("return document.getElementById('quote').textContent;", vec![]).await.unwrap();
    assert_eq!(shown, "Costs 18 credits");
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    assert_eq!(jobs["data"], json!([]), "a quote makes no job");
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!((account["credits_available"].as_u64(), account["credits_held"].as_u64()), (Some(100), Some(0)));
    page.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_page_shows_the_balance_the_ledger_and_spending_per_model_and_day() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(100, json!({})).await;
    for (endpoint, body) in
        [("images", json!({"prompt": "a fox", "n": 2})), ("images", json!({"model": "flux-pro", "prompt": "a hen"}))]
    {
        let receipt = app.submit(endpoint, &user.key, body).await;
        let job = app.wait_final(&user.key, receipt["job_id"].as_str().unwrap()).await;
        assert_eq!(job["state"], "succeeded");
    }
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    let ledger: Value = app.get("/api/v1/account/ledger?limit=50", &user.key).await.json().await.unwrap();

    let driver = chromedriver().await;
    let page = browser(&driver).await;
    page.goto(&app.url("/playground/account")).await.unwrap();
    page.execute("document.getElementById('api-key').value = arguments[0];", vec![json!(user.key)]).await.unwrap();
    page.find(Locator::Id("save-key")).await.unwrap().click().await.unwrap();

    let shown =
        until(&page, "the balance", "const t = document.getElementById('spent').textContent; return t !== '–' && t;")
            .await;
    assert_eq!(shown.as_str().unwrap(), account["credits_spent"].to_string());
    let rows = until(&page, "the ledger", "return document.querySelectorAll('#ledger tr').length;").await;
    assert_eq!(rows.as_u64(), Some(ledger["data"].as_array().unwrap().len() as u64), "one row an entry");
    let kinds = page
        .execute("return [...document.querySelectorAll('#ledger td.kind')].map(c => c.textContent);", vec![])
        .await
        .unwrap();
    let expected: Vec<&str> = ledger["data"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, json!(expected), "newest first, as the API lists them");
    let models = until(&page, "the chart", "return document.getElementById('chart').dataset.models;").await;
    assert_eq!(models, "flux-pro,nano-banana", "a series per model that spent");
    let legend = page
        .execute(
            "return [...document.querySelectorAll('#chart .u-legend .u-series .u-label')].map(e => e.textContent);",
            vec![],
        )
        .await
        .unwrap();
    assert!(legend.as_array().unwrap().iter().any(|l| l == "flux-pro"), "the chart is drawn with its legend: {legend}");
    assert!(page.find(Locator::Css("#chart canvas")).await.is_ok(), "uPlot drew its canvas");
}

/// A job submitted from the playground with a webhook URL shows its deliveries once it ends, and
/// its redelivery button posts the event again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_shows_a_jobs_webhook_deliveries() {
    let app = spawn_app_with(genjobs_tests::client_webhook_config(Duration::from_secs(10))).await;
    let receiver = genjobs_tests::WebhookReceiver::start(vec![]).await;
    let driver = chromedriver().await;
    let page = browser(&driver).await;
    page.goto(&app.url("/playground")).await.unwrap();
    use_key(&page, &app.demo_key).await;
    set_prompt(&page, "a kite over the sea").await;
    page.execute("document.getElementById('webhook-url').value = arguments[0];", vec![json!(receiver.url)])
        .await
        .unwrap();
    page.find(Locator::Id("submit")).await.unwrap().click().await.unwrap();
    let shown = until(
        &page,
        "the deliveries",
        "const d = document.getElementById('deliveries'); return d.textContent.includes('delivered') && d.textContent;",
    )
    .await;
    let shown = shown.as_str().unwrap();
    assert!(shown.contains("job.succeeded") && shown.contains(&receiver.url) && shown.contains("200"), "{shown}");
    receiver.wait_for(1, Duration::from_secs(20)).await;
    page.execute("document.querySelector('#deliveries button').click();", vec![]).await.unwrap();
    let posts = receiver.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(posts[0].header("webhook-id"), posts[1].header("webhook-id"));
}

/// A restricted key sees its models only and what is left of its budget, which a job spends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_shows_a_keys_models_and_budget_left() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(100, json!({})).await;
    let body = json!({"name": "flux only", "models": ["flux-pro"], "budget": {"credits": 30, "period": "day"}});
    let response = app.post(&format!("/api/admin/users/{}/keys", user.id), genjobs_tests::ADMIN_TOKEN, &body).await;
    assert_eq!(response.status(), 201);
    let restricted: Value = response.json().await.unwrap();
    let restricted = restricted["api_key"].as_str().unwrap().to_owned();

    let driver = chromedriver().await;
    let page = browser(&driver).await;
    page.goto(&app.url("/playground")).await.unwrap();
    use_key(&page, &restricted).await;
    let scope =
        until(&page, "the key's scope", "return document.getElementById('key-scope').dataset.budgetLeft;").await;
    assert_eq!(scope, "30");
    let models = page.execute("return document.getElementById('key-scope').dataset.models;", vec![]).await.unwrap();
    assert_eq!(models, "flux-pro");
    let listed =
        page.execute("return [...document.getElementById('model').options].map(o => o.value);", vec![]).await.unwrap();
    assert_eq!(listed, json!(["flux-pro"]), "the form offers the key's models only");

    set_prompt(&page, "a lighthouse at dusk").await;
    page.find(Locator::Id("submit")).await.unwrap().click().await.unwrap();
    until(&page, "the job's end", "return document.getElementById('state').textContent === 'succeeded';").await;
    until(&page, "the budget spent", "return document.getElementById('key-scope').dataset.budgetLeft === '24';").await;
    let text = page.execute("return document.getElementById('key-scope').textContent;", vec![]).await.unwrap();
    assert_eq!(text, "· this key: models: flux-pro · budget: 24 of 30 left this day");
    page.close().await.unwrap();
}

/// With the provider's one slot held by a job that never ends and another of the user's jobs
/// waiting before it, a job submitted in the playground shows that it waits for capacity and its
/// place among the user's waiting jobs; once the slots free, it runs to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_shows_a_job_waiting_for_capacity_and_its_place() {
    let app = spawn_app_with(genjobs::Config {
        upstream_key: Some("only-key-pppp".into()),
        upstream_max_in_flight: 1,
        gateway: genjobs_domain::usecases::Settings { upstream_cancel: true, ..fast_config().gateway.clone() },
        ..fast_config()
    })
    .await;
    let holding = app.submit("images", &app.demo_key, json!({"prompt": "holds the slot [sim:hang]"})).await;
    let holding = holding["job_id"].as_str().unwrap().to_owned();
    app.job_until(&app.demo_key, &holding, Duration::from_secs(10), |job| !job["upstream"].is_null()).await;
    let first = app.submit("images", &app.demo_key, json!({"prompt": "waits first [sim:hang]"})).await;
    let first = first["job_id"].as_str().unwrap().to_owned();
    let driver = chromedriver().await;
    let page = browser(&driver).await;
    page.goto(&app.url("/playground")).await.unwrap();
    use_key(&page, &app.demo_key).await;
    set_prompt(&page, "a lighthouse while others wait").await;
    page.find(Locator::Id("submit")).await.unwrap().click().await.unwrap();
    let shown = until(
        &page,
        "the waiting line",
        "const w = document.getElementById('waiting').textContent; return w.includes('#') && w;",
    )
    .await;
    assert_eq!(shown, "waiting for capacity: #2 among your waiting jobs");
    screenshot(&page, "playground-waiting").await;
    for id in [&holding, &first] {
        let canceled = app.post(&format!("/api/v1/jobs/{id}/cancel"), &app.demo_key, &json!({})).await;
        assert_eq!(canceled.status(), 200);
    }
    until(&page, "the job's success", "return document.getElementById('state').textContent === 'succeeded';").await;
    let left = page.execute("return document.getElementById('waiting').textContent;", vec![]).await.unwrap();
    assert_eq!(left, "", "no waiting line once it ran");
    page.close().await.unwrap();
}
