//! What only the embedded default does.

use genjobs::Config;
use genjobs_tests::{fast_config, spawn_app_with};
use serde_json::Value;

#[tokio::test]
async fn the_demo_user_has_the_configured_credits() {
    let app = spawn_app_with(Config { demo_credits: 77, ..fast_config() }).await;
    let account: Value = app.get("/api/v1/account", &app.demo_key).await.json().await.unwrap();
    assert_eq!(account["credits_available"], 77);
}
